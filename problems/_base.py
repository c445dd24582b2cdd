"""The :class:`Problem` base: one method's problem on the user's data, and its descriptor.

A subclass per method (``cvxmetric.problems.LMNN``, ...) is the one place that knows the method:

* its fast algorithms, the default first (:attr:`Problem.methods`), and how to run one
  (:meth:`Problem._run`);
* the documented runs the verification harness reports, one row each (:meth:`Problem.runs`, each a
  :class:`Run`: an algorithm with its settings, e.g. LMNN's subgradient engine with impostors found
  by search and on the materialised triplet set), labelled from :attr:`Problem.label`;
* how the user's data and parameters (the estimators' names) become an
  :class:`cvxmetric.instances.Instance` (the subclass' ``__init__``);
* its cvxpy formulation, built lazily (:meth:`Problem._build_formulation`, importing
  :mod:`cvxmetric.formulations` only when called, so ``import cvxmetric`` never loads cvxpy);
* which harness thresholds hold a result (:attr:`Problem.result_variants`), what the exact solve
  adds to its result (:meth:`Problem._exact_fields`), and how a result maps to an estimator's
  ``components_`` (:meth:`Problem.components`).

Subclasses register themselves by their :attr:`Problem.name` (the problem family, the harness'
method name): the estimators, the ``check`` command line and :func:`problem_class` read the
registry, so a new method is one new subclass (and its harness checks,
``cvxmetric.verification.methods``).
"""
from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import ClassVar, Mapping, Optional

import numpy as np

from cvxmetric.certificates import relative_difference, relative_gap
from cvxmetric.instances import Instance
from cvxmetric.solvers.result import SolverResult, make_result

__all__ = ["Problem", "CheckReport", "Run", "problem_class", "problem_of", "list_problems", "bundled", "EXACT",
           "instance_name", "CHECK_TRUTH_FRACTION"]

#: The name of the exact solve (the certified cvxpy ground truth) among a problem's methods.
EXACT = "cvxpy"

#: When the certified interval at the method's ground-truth tolerance is too wide to decide a
#: user's ``rtol``, :meth:`Problem.check` certifies it again to ``CHECK_TRUTH_FRACTION * rtol``: an
#: interval a tenth of the tolerance leaves a point within ``0.9 * rtol`` of the upper end
#: decided "optimal" and one beyond ``rtol`` of it decided "suboptimal".
CHECK_TRUTH_FRACTION = 0.1

_REGISTRY: dict[str, type] = {}


def problem_class(name: str) -> type:
    """The :class:`Problem` subclass of a problem family (``"lmnn"``, ``"itml"``, ...)."""
    _load_builtin()
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"unknown problem {name!r}; choose one of {', '.join(list_problems())}")
    return _REGISTRY[name]


def list_problems() -> list[str]:
    """Names of the registered problem families."""
    _load_builtin()
    return sorted(_REGISTRY)


def bundled(problem: str, instance: str, seed: int = 0) -> "Problem":
    """The :class:`Problem` of a bundled instance (``cvxmetric.instances``), e.g. ``bundled("lmnn", "iris-sub")``."""
    from cvxmetric.instances import get_instance
    return problem_class(problem).from_instance(get_instance(problem, instance, seed=seed))


def problem_of(instance: Instance) -> "Problem":
    """The :class:`Problem` of an :class:`~cvxmetric.instances.Instance`, by its problem family
    (``instance.method``): how the harness solves and states every instance it verifies."""
    if not isinstance(instance, Instance):
        raise TypeError(f"instance must be a cvxmetric.instances.Instance; got {type(instance).__name__}")
    return problem_class(instance.method).from_instance(instance)


def _load_builtin() -> None:
    import cvxmetric.problems  # noqa: F401 - registers the built-in problems


def instance_name(kind: str, X: np.ndarray, *parts) -> str:
    """A name that identifies a problem by its content (caches key ground truths by name)."""
    h = hashlib.sha1(np.ascontiguousarray(X).tobytes())
    for p in parts:
        if isinstance(p, np.ndarray):
            h.update(np.ascontiguousarray(p).tobytes())
        elif hasattr(p, "idx"):       # a ConstraintSet
            for a in (p.idx, p.delta, p.weight):
                h.update(np.ascontiguousarray(a).tobytes())
        elif isinstance(p, dict):
            for k in sorted(p):
                v = p[k]
                h.update(k.encode())
                h.update(np.ascontiguousarray(v).tobytes() if isinstance(v, np.ndarray) else repr(v).encode())
        else:
            h.update(repr(p).encode())
    return f"{kind}-fit-{h.hexdigest()[:12]}"


def ordered_methods(methods, default: str) -> tuple:
    """The algorithm names of a facade's ``methods`` table, its ``default`` first (a Problem's :attr:`Problem.methods`)."""
    if default not in methods:
        raise ValueError(f"the default method {default!r} is not one of {tuple(methods)}")
    return (default,) + tuple(m for m in methods if m != default)


def solver_options(tol, max_iter, *, max_iter_name: Optional[str] = "max_iter", **options) -> dict:
    """The keyword options of a facade call: ``options`` plus ``tol`` and ``max_iter`` when given."""
    out = dict(options)
    if tol is not None:
        out["tol"] = tol
    if max_iter is not None:
        if max_iter_name is None:
            raise ValueError("max_iter is not used by this solver (it solves in closed form); leave max_iter=None")
        out[max_iter_name] = max_iter
    return out


@dataclass(frozen=True)
class Run:
    """One documented run of a problem's algorithm: a row of the verification harness.

    Attributes
    ----------
    label : str
        The run's name; its row is labelled ``problem.run_label(run)``, ``f"{problem.label}-{label}"``
        (``"lmnn-search"``).
    method : str
        The algorithm (one of :meth:`Problem.available_methods`, or of the problem's ``entry``).
        Its harness thresholds are those of ``method`` unless :attr:`Problem.result_variants` maps
        the row's label to others.
    options : mapping
        The settings of the run (``tol``, ``max_iter`` and the algorithm's options), passed to
        ``entry``.
    entry : str
        The problem's method that runs it, called as ``entry(method, **options)``: ``"solve"``, or
        another documented solve of the problem (Fantope's :meth:`~cvxmetric.problems.Fantope.solve_bound`).
    expect_converged : bool
        Whether the row requires ``converged=True``; False only for an algorithm that is not
        optimal by design (its row checks that it does not claim convergence).
    """

    label: str
    method: str
    options: Mapping = field(default_factory=dict)
    entry: str = "solve"
    expect_converged: bool = True


@dataclass(frozen=True)
class CheckReport:
    """What :meth:`Problem.check` found about a point.

    Attributes
    ----------
    problem : str
        The problem family.
    value : float or None
        The objective at the point (made feasible as ``point`` below; None when it cannot be evaluated).
    lower, upper : float or None
        The certified interval :math:`[\\ell, u]` of the optimum.
    rel_gap : float or None
        ``relative_difference(value, upper)``: how far the point is above the best certified value.
    rel_gap_lower : float or None
        ``relative_difference(value, lower)``: at most this far above the optimum (certified).
    kkt : float or None
        The method's KKT residual at the point (the harness' fast-point residual), None when the
        method defines none.
    lambda_min : float or None
        Smallest eigenvalue of a matrix point.
    feasible : bool
        Whether the point is feasible (PSD to round-off, finite objective).
    rtol : float
        The relative tolerance of the verdict.
    truth_rtol : float
        The relative width the certified interval was held to.
    verdict : str
        ``"optimal"`` (certified within ``rtol`` of the optimum), ``"suboptimal"`` (certified more
        than ``rtol`` above it), ``"infeasible"``, or ``"undecided"`` (the interval could not be
        certified narrow enough to decide: the oracle's limit, not the point's fault).
    reason : str
        One sentence explaining the verdict.
    """

    problem: str
    value: Optional[float]
    lower: Optional[float]
    upper: Optional[float]
    rel_gap: Optional[float]
    rel_gap_lower: Optional[float]
    kkt: Optional[float]
    lambda_min: Optional[float]
    feasible: bool
    rtol: float
    truth_rtol: float
    verdict: str
    reason: str

    @property
    def optimal(self) -> bool:
        """Whether the verdict is ``"optimal"``."""
        return self.verdict == "optimal"

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return "\n".join(f"{k:14s} {v}" for k, v in self.as_dict().items())


def _finite(x) -> Optional[float]:
    return None if x is None or not math.isfinite(float(x)) else float(x)


class Problem(ABC):
    """One metric-learning problem on given data: solve it, certify it, check any point.

    Subclasses build the problem from the user's data (their ``__init__``); every method here is
    shared. Every result is the one contract :class:`cvxmetric.solvers.result.SolverResult`.

    Attributes
    ----------
    instance : cvxmetric.instances.Instance
        The problem's data and hyper-parameters (as the harness and the formulation read them).
    """

    #: The problem family (the harness' method name); a subclass with a name registers itself.
    name: ClassVar[str] = ""
    #: The fast algorithms (``method=`` of the ``solve_<method>`` facade), the default first.
    methods: ClassVar[tuple] = ()
    #: A result's ``solver`` label (or a harness row's label, :meth:`run_thresholds`) -> the
    #: harness thresholds key it is held to, for results of a variant of the algorithm asked for
    #: (e.g. ``"qwise-pdhg-ws"``, PDHG on a working set).
    result_variants: ClassVar[Mapping[str, str]] = {}
    #: The harness thresholds key of the exact solve (None: the first-order gap, no KKT check).
    exact_thresholds: ClassVar[Optional[str]] = None
    #: Keys of the data file of ``python -m cvxmetric.verification check`` (required, optional).
    data_keys: ClassVar[tuple] = ("X",)
    optional_data_keys: ClassVar[tuple] = ()
    #: The fast algorithms' option that takes a start (an estimator's ``init``): a matrix ``M0``.
    start_option: ClassVar[str] = "M0"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            _REGISTRY[cls.name] = cls

    def __init__(self, instance: Instance):
        if not isinstance(instance, Instance):
            raise TypeError(f"instance must be a cvxmetric.instances.Instance; got {type(instance).__name__}")
        self.instance = instance
        self._form = None
        self._truths: dict = {}
        self._ran: dict = {}

    @classmethod
    def from_instance(cls, instance: Instance) -> "Problem":
        """The problem of an existing :class:`~cvxmetric.instances.Instance` (e.g. a bundled one)."""
        if instance.method != cls.name:
            raise ValueError(f"{cls.__name__} takes instances of problem {cls.name!r}; got {instance.method!r}")
        obj = cls.__new__(cls)
        Problem.__init__(obj, instance)
        return obj

    # ------------------------------------------------------------------ data
    @property
    def X(self) -> np.ndarray:
        return self.instance.X

    @property
    def constraints(self):
        return self.instance.constraints

    @property
    def params(self) -> dict:
        return self.instance.params

    @property
    def d(self) -> int:
        return self.instance.d

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.X.shape[0]}, d={self.d}, {self.instance.name})"

    # ------------------------------------------------------------------ descriptor hooks
    def default_method(self) -> str:
        """The default fast algorithm (shared by the estimator)."""
        return self.available_methods()[0]

    def available_methods(self) -> tuple:
        """The fast algorithms that apply to this problem, the default first."""
        return tuple(self.methods)

    @property
    def label(self) -> str:
        """The prefix of the harness' row labels of this problem (its name, ``-`` for ``_``)."""
        return self.name.replace("_", "-")

    def runs(self) -> tuple:
        """The documented runs the verification harness reports (one :class:`Run` per row): by
        default each available algorithm at its defaults, labelled by its name."""
        return tuple(Run(method, method) for method in self.available_methods())

    def run_label(self, run: Run) -> str:
        """The harness' row label of a documented :class:`Run`: ``f"{label}-{run.label}"``."""
        return f"{self.label}-{run.label}"

    def execute(self, run: Run) -> SolverResult:
        """The result of a documented :class:`Run`: ``entry(method, **options)``."""
        if not isinstance(run, Run):
            raise TypeError(f"run must be a cvxmetric.problems.Run; got {type(run).__name__}")
        return getattr(self, run.entry)(run.method, **run.options)

    @abstractmethod
    def _run(self, method: str, tol, max_iter, random_state, options: dict) -> SolverResult:
        """Run the fast algorithm ``method`` (a subclass calls its ``solve_<method>`` facade)."""

    @abstractmethod
    def _build_formulation(self, instance: Instance):
        """The cvxpy formulation of ``instance`` (a subclass imports :mod:`cvxmetric.formulations`
        inside the method, so that ``import cvxmetric`` never loads cvxpy)."""

    def _spec(self):
        """The harness' :class:`~cvxmetric.verification.registry.MethodSpec` that verifies this problem."""
        from cvxmetric.verification.registry import spec_of_problem
        return spec_of_problem(self.name)

    def _exact_fields(self, form, point) -> tuple[dict, dict]:
        """Extra ``(info, fields)`` of the exact solve's result at the certified ``point``."""
        return {}, {}

    def components(self, result: SolverResult) -> np.ndarray:
        """An estimator's ``components_`` from a result: ``L`` with ``L.T @ L`` the PSD part of ``M``."""
        from cvxmetric.linalg import eigh_descending
        lam, V = eigh_descending(np.asarray(result.M, dtype=np.float64))
        return (V * np.sqrt(np.clip(lam, 0.0, None))).T.copy()

    def _check_instance(self, point) -> Instance:
        """The instance whose optimum certifies ``point`` (the problem's own, for convex problems)."""
        return self.instance

    # ------------------------------------------------------------------ solving
    def solve(self, method: Optional[str] = None, *, tol=None, max_iter=None, random_state=None,
              **options) -> SolverResult:
        """Solve by a fast algorithm (default :meth:`default_method`) or exactly (``method="cvxpy"``).

        Parameters
        ----------
        method : str, optional
            One of :meth:`available_methods`, or ``"cvxpy"`` (the certified ground truth as a result).
        tol : float, optional
            What ``converged`` is held to (the algorithm's default when None).
        max_iter : int, optional
            Iteration limit (the algorithm's default when None).
        random_state : None, int or Generator
            Seed of the algorithm's random choices (where it makes any).
        **options
            Further options of the algorithm (an option it does not read raises ValueError).
        """
        method = self.default_method() if method is None else method
        allowed = self.available_methods() + (EXACT,)
        if not isinstance(method, str) or method not in allowed:
            raise ValueError(f"method must be one of {allowed} for {type(self).__name__}; got {method!r}")
        if method == EXACT:
            if options:
                raise ValueError(f"the exact solve 'cvxpy' takes no solver options (got {sorted(options)}): the "
                                 "solve ladder chooses the cvxpy solvers; only tol (the certified relative gap) "
                                 "applies")
            result = self.exact(tol=tol, max_iter=max_iter)
        else:
            result = self._run(method, tol, max_iter, random_state, options)
        self._ran[id(result)] = (result, method)
        return result

    def formulation(self):
        """The cvxpy formulation (built once; needs cvxpy)."""
        if self._form is None:
            self._form = self._build_formulation(self.instance)
        return self._form

    def default_truth_rtol(self) -> float:
        """The relative width the harness requires of this problem's certified ground truth."""
        return self._spec().truth_tolerance()

    def truth(self, rtol: Optional[float] = None):
        """The certified interval of the optimum, a
        :class:`cvxmetric.formulations.ladder.CertifiedTruth` (cached per ``rtol``).

        ``rtol`` (default :meth:`default_truth_rtol`) is the relative width the solve ladder
        tries to reach; ``truth.certified`` says whether it did.
        """
        return self._truth_of(self.instance, rtol)

    def _truth_of(self, instance: Instance, rtol: Optional[float]):
        from cvxmetric.formulations.ladder import solve_certified
        rtol = self.default_truth_rtol() if rtol is None else _positive(rtol, "rtol")
        key = (instance.name, rtol)
        if key not in self._truths:
            form = self.formulation() if instance is self.instance else self._build_formulation(instance)
            self._truths[key] = solve_certified(form, rtol)
        return self._truths[key]

    def objective(self, point) -> float:
        """The objective at ``point`` (``M``, or ``w`` for ORML): the formulation's ``value_at``, every
        slack minimised, equal to the fast model's objective."""
        return self.formulation().value_at(self._as_point(point, self.formulation()))

    def exact(self, *, tol=None, max_iter=None) -> SolverResult:
        """The certified ground truth as a :class:`SolverResult` (``method="cvxpy"`` of :meth:`solve`).

        The interval :math:`[\\ell, u]` of :func:`cvxmetric.formulations.ladder.solve_certified`
        gives ``objective = u`` (its feasible point's value), ``lower_bound = \\ell`` and
        ``measure = "certified_gap"`` held to ``tol`` (default :meth:`default_truth_rtol`).
        """
        if max_iter is not None:
            raise ValueError("max_iter is not used by the exact solve 'cvxpy' (the solve ladder sets the cvxpy "
                             "solvers' limits); leave max_iter=None")
        tol = self.default_truth_rtol() if tol is None else _positive(tol, "tol")
        truth = self.truth(tol)
        form = self.formulation()
        point = truth.point
        info = {"rung": truth.rung, "attempts": [a.__dict__ for a in truth.attempts]}
        fields = {}
        if point is not None:
            more, fields = self._exact_fields(form, point)
            info.update(more)
        key = "w" if form.point_name == "w" else "M"
        return make_result(f"{self.name}-cvxpy", objective=np.nan if truth.bounds.upper is None else truth.bounds.upper,
                           measure="certified_gap", tol=tol,
                           stop_reason="converged" if truth.certified else "not_certified",
                           lower_bound=truth.bounds.lower, time=truth.time, info=info,
                           detail=f"solve ladder, certifying rung {truth.rung}", **{key: point}, **fields)

    # ------------------------------------------------------------------ checking
    def _as_point(self, point, form) -> np.ndarray:
        arr = np.array(point, dtype=np.float64)
        expected = form.point.shape
        if arr.shape != expected:
            raise ValueError(f"the point of {type(self).__name__} must have shape {expected} "
                             f"({form.point_name}); got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"the point {form.point_name} contains NaN or inf")
        if form.point_name == "M":
            scale = float(np.max(np.abs(arr))) if arr.size else 0.0
            asym = float(np.max(np.abs(arr - arr.T))) if arr.size else 0.0
            if asym > _symmetry_rtol() * scale:
                raise ValueError(f"M is not symmetric (max |M - M.T| = {asym:.3g}); pass a symmetric matrix")
            arr = 0.5 * (arr + arr.T)
        return arr

    def check(self, point, rtol: float = 1e-6) -> CheckReport:
        r"""Check a point (``M``; ``w`` for ORML) from any solver against the certified optimum.

        The point is made feasible by the formulation's own map (a PSD projection of round-off;
        for MMC the rescaling onto its constraint, MMC's solution being defined up to scale) and
        its value compared with the certified interval :math:`[\\ell, u]`:

        * ``"optimal"`` when ``relative_difference(value, l) <= rtol`` (certified: the point is
          within ``rtol`` of the optimum, whatever the interval's width);
        * ``"suboptimal"`` when ``relative_difference(value, u) > rtol`` (certified: a feasible point
          is better by more than ``rtol``);
        * ``"infeasible"`` when ``M`` is not PSD beyond round-off (the harness' threshold
          ``verification.tolerances.PSD_FEASIBILITY_TOL``, relative to :math:`|\lambda_{\max}|`)
          or the objective is not finite there;
        * ``"undecided"`` otherwise, after certifying the interval again to
          ``CHECK_TRUTH_FRACTION * rtol``: the oracle could not certify an interval narrow
          enough, which says nothing against the point.

        Parameters
        ----------
        point : array_like
            ``M`` (d, d), symmetric; ``w`` for ORML.
        rtol : float
            The relative tolerance the point claims.

        Returns
        -------
        CheckReport
        """
        rtol = _positive(rtol, "rtol")
        instance = self._check_instance(point)
        form = self.formulation() if instance is self.instance else self._build_formulation(instance)
        arr = self._as_point(point, form)
        lam_min = None
        feasible = True
        if form.point_name == "M":
            lam = np.linalg.eigvalsh(arr)
            lam_min = float(lam[0])
            feasible = lam[0] >= -_psd_rtol() * max(abs(lam[-1]), np.finfo(float).tiny)
        value = _finite(form.value_at(form.feasible_point(arr))) if feasible else None
        kkt = self._kkt(form, form.feasible_point(arr)) if feasible else None
        truth = self._truth_of(instance, None)
        if not feasible or value is None:
            why = (f"M is not PSD: lambda_min = {lam_min:.3g}" if not feasible
                   else "the objective is not finite at the point")
            return self._report(value, truth, kkt, lam_min, False, rtol, "infeasible", why)
        verdict = _verdict(value, truth.bounds, rtol)
        if verdict is None:
            tighter = CHECK_TRUTH_FRACTION * rtol
            if tighter < truth.rtol:
                truth = self._truth_of(instance, tighter)
                verdict = _verdict(value, truth.bounds, rtol)
        if verdict is None:
            width = relative_gap(truth.bounds.upper, truth.bounds.lower)
            return self._report(value, truth, kkt, lam_min, True, rtol, "undecided",
                                f"the certified interval (relative width {width:.2g}) is too wide to decide "
                                f"rtol = {rtol:.2g}: the oracle could not certify the optimum more tightly")
        reason = (f"certified within rtol = {rtol:.2g} of the optimum" if verdict == "optimal"
                  else f"a feasible point is better by more than rtol = {rtol:.2g}")
        return self._report(value, truth, kkt, lam_min, True, rtol, verdict, reason)

    def _kkt(self, form, point) -> Optional[float]:
        spec = self._spec()
        if spec.kkt_fast is None:
            return None
        try:
            return _finite(spec.kkt_fast(form, point))
        except (ValueError, np.linalg.LinAlgError):   # a residual that is undefined there is not reported
            return None

    def _report(self, value, truth, kkt, lam_min, feasible, rtol, verdict, reason) -> CheckReport:
        lo, up = truth.bounds.lower, truth.bounds.upper
        return CheckReport(
            problem=self.name, value=value, lower=_finite(lo) if lo is not None else None,
            upper=_finite(up) if up is not None else None,
            rel_gap=None if value is None or up is None else float(relative_difference(value, up)),
            rel_gap_lower=None if value is None or lo is None else float(relative_difference(value, lo)),
            kkt=kkt, lambda_min=lam_min, feasible=bool(feasible), rtol=rtol, truth_rtol=truth.rtol,
            verdict=verdict, reason=reason)

    # ------------------------------------------------------------------ the harness row
    def thresholds(self, result: SolverResult, method: str):
        """The harness thresholds (gap, KKT) that hold ``result`` of the algorithm ``method``."""
        key = self.exact_thresholds if method == EXACT else self.result_variants.get(result.solver, method)
        return self.thresholds_of(key)

    def thresholds_of(self, key: Optional[str]):
        """The harness thresholds (gap, KKT) of the key ``key`` of the method's ``TOLERANCES``
        (the first-order gap and no KKT check when it has none)."""
        from cvxmetric.verification.registry import Thresholds
        from cvxmetric.verification.tolerances import GAP_FIRST_ORDER
        found = self._spec().tolerances.get(key) if key is not None else None
        return found if found is not None else Thresholds(GAP_FIRST_ORDER, None)

    def run_thresholds(self, run: Run):
        """The harness thresholds of a documented :class:`Run`: those of its algorithm, or of the
        variant its row's label names (:attr:`result_variants`)."""
        return self.thresholds_of(self.result_variants.get(self.run_label(run), run.method))

    def verify(self, result: SolverResult, *, method: Optional[str] = None, gap_tol: Optional[float] = None,
               kkt_tol: Optional[float] = None) -> dict:
        """The verification harness' row of ``result`` (:func:`cvxmetric.verification.harness.verify_result`).

        ``method`` is the algorithm that produced ``result``; it may be omitted for a result of this
        problem's own :meth:`solve`. The thresholds are the harness' for that algorithm unless
        ``gap_tol`` / ``kkt_tol`` are given. Needs cvxpy.
        """
        if method is None:
            ran = self._ran.get(id(result))
            if ran is None or ran[0] is not result:
                raise ValueError("verify(result) needs method= (the algorithm that produced result) for a "
                                 "result that this problem's solve() did not return")
            method = ran[1]
        from cvxmetric.verification.harness import verify_result
        held = self.thresholds(result, method)
        gap = held.gap_tol if gap_tol is None else float(gap_tol)
        kkt = held.kkt_tol if kkt_tol is None else float(kkt_tol)
        inst = self._verification_instance(result)
        return verify_result(self._spec().name, inst, result, solver=result.solver, gap_tol=gap, kkt_tol=kkt)

    def _verification_instance(self, result: SolverResult) -> Instance:
        return self.instance


def _verdict(value: float, bounds, rtol: float) -> Optional[str]:
    """``"optimal"`` / ``"suboptimal"`` when the interval decides ``rtol``, else None."""
    if bounds.lower is not None and relative_difference(value, bounds.lower) <= rtol:
        return "optimal"
    if bounds.upper is not None and relative_difference(value, bounds.upper) > rtol:
        return "suboptimal"
    return None


def _positive(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating)) or not (x > 0 and math.isfinite(x)):
        raise ValueError(f"{name} must be a positive number; got {x!r}")
    return float(x)


def _symmetry_rtol() -> float:
    """A point is symmetric when ``max |M - M.T| <= SYMMETRY_RTOL * max |M|`` (the harness' rule)."""
    from cvxmetric.verification.tolerances import SYMMETRY_RTOL
    return SYMMETRY_RTOL


def _psd_rtol() -> float:
    """A matrix point is PSD when ``lambda_min >= -PSD_FEASIBILITY_TOL * |lambda_max|`` (the harness' rule)."""
    from cvxmetric.verification.tolerances import PSD_FEASIBILITY_TOL
    return PSD_FEASIBILITY_TOL
