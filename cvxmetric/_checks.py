"""Input validation shared by every layer.

Every public entry point of the project checks its inputs with these helpers, so that bad
input fails early with a message that names the argument and says how to fix it. None of
the helpers modifies its input: they return validated *copies* (or read-only views of
fresh arrays) where a conversion is needed.
"""
from __future__ import annotations

import argparse
import inspect
import math
import numbers
from collections.abc import Callable, Collection, Mapping

import numpy as np

from .tolerances import DATA_SCALE_MAX, DATA_SCALE_MIN, SYMMETRY_RTOL, ZERO_LENGTH_RTOL

__all__ = [
    "as_data_matrix",
    "check_data_scale",
    "as_square_symmetric",
    "as_labels",
    "as_index_array",
    "index_dtype",
    "as_rng",
    "check_bool",
    "check_positive",
    "check_nonnegative",
    "check_int_in_range",
    "zero_length_mask",
    "broadcast_vector",
    "keyword_options",
    "check_method_options",
]

#: dtype kinds read as real numbers: bool, signed and unsigned integers, floats. Complex data
#: would lose its imaginary part in a float conversion; strings and objects (e.g. "1.5", Decimal,
#: a mixed-type DataFrame) would be parsed silently or fail deep inside numpy.
_REAL_KINDS = "biuf"


def _as_real_float_array(X, name: str, what: str) -> np.ndarray:
    """``X`` as a fresh float64 array; TypeError for complex, string, object or ragged input."""
    try:
        raw = np.asarray(X)
    except (TypeError, ValueError) as exc:  # ragged nested sequences
        raise TypeError(f"{name} must be {what}; got {type(X).__name__} that is not a rectangular "
                        "numeric array") from exc
    if raw.dtype.kind == "c":
        raise TypeError(
            f"{name} is complex (dtype {raw.dtype}); metric learning needs real data: pass "
            f"{name}.real if the imaginary part is zero, or stack real and imaginary parts as "
            "separate features"
        )
    if raw.dtype.kind not in _REAL_KINDS:
        raise TypeError(
            f"{name} must be {what} with a real numeric dtype; got dtype {raw.dtype} "
            f"({type(X).__name__}): convert it first, e.g. np.asarray({name}, dtype=float)"
        )
    return np.array(raw, dtype=np.float64, copy=True)


def as_data_matrix(X, name: str = "X", *, min_rows: int = 1) -> np.ndarray:
    """Return ``X`` as a finite float64 array of shape (n, d), copying it.

    Raises
    ------
    TypeError
        If ``X`` is not a real numeric array: complex (its imaginary part would be dropped),
        strings, Python objects or a ragged nested list.
    ValueError
        If ``X`` is not 2-D, has fewer than ``min_rows`` rows, zero columns, holds NaN/inf, or
        has a scale outside ``[DATA_SCALE_MIN, DATA_SCALE_MAX]`` (:func:`check_data_scale`).
    """
    arr = _as_real_float_array(X, name, "a numeric array of shape (n, d)")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D with shape (n, d); got an array with shape {arr.shape}")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has d = 0 features; give at least one column")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} has {arr.shape[0]} rows; at least {min_rows} are needed")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"{name} contains NaN or inf (first at row {bad[0]}, column {bad[1]}); "
            "remove or impute non-finite values first"
        )
    check_data_scale(arr, name)
    return arr


def check_data_scale(X: np.ndarray, name: str = "X") -> None:
    """ValueError when the finite array ``X`` is too large or its spread too small for float64.

    The largest magnitude must be at most ``DATA_SCALE_MAX`` and the spread (the largest
    ``max - min`` of a feature) at least ``DATA_SCALE_MIN`` unless it is 0 (all rows equal);
    see :data:`cvxmetric.tolerances.DATA_SCALE_MAX` for why. The message gives the factor that
    brings ``X`` back to unit scale.
    """
    if X.size == 0:
        return
    top = float(np.max(np.abs(X)))
    if top > DATA_SCALE_MAX:
        raise ValueError(f"{name} has entries up to {top:.3g}, beyond the largest data scale the solvers handle "
                         f"({DATA_SCALE_MAX:.3g}): its squared distances and their products overflow float64. "
                         f"Rescale it first, e.g. {name} / {top:.3g} or sklearn's StandardScaler")
    spread = float(np.max(np.ptp(X, axis=0))) if X.shape[0] > 1 else 0.0
    if 0.0 < spread < DATA_SCALE_MIN:
        raise ValueError(f"{name} spreads over at most {spread:.3g} in any feature, below the smallest data scale "
                         f"the solvers handle ({DATA_SCALE_MIN:.3g}): its squared distances and their products "
                         f"underflow float64. Rescale it first, e.g. {name} / {spread:.3g} or sklearn's StandardScaler")


def as_square_symmetric(M, name: str = "M", *, d: int | None = None, psd: bool = False,
                        psd_tol: float | None = None) -> np.ndarray:
    """Return ``M`` as a finite symmetric float64 (d, d) array (exactly symmetrized copy).

    ``M`` must be symmetric to a relative tolerance of ``SYMMETRY_RTOL``; the returned copy is
    ``(M + M.T) / 2``. With ``psd=True`` the smallest eigenvalue must be at least
    ``-psd_tol * ||M||_2``. Both tests are relative to the size of ``M`` (no absolute floor), so
    they give the same verdict for ``M`` and ``s * M`` at any scale ``s > 0``.
    """
    arr = _as_real_float_array(M, name, "a numeric square matrix")
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be a square matrix; got shape {arr.shape}")
    if d is not None and arr.shape[0] != d:
        raise ValueError(f"{name} must have shape ({d}, {d}) to match the data; got {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (d = 0); give at least a 1 x 1 matrix")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf; pass a finite matrix")
    scale = float(np.max(np.abs(arr)))
    asym = float(np.max(np.abs(arr - arr.T)))
    if asym > SYMMETRY_RTOL * scale:
        raise ValueError(
            f"{name} is not symmetric (max |{name} - {name}.T| = {asym:.3g}); "
            f"pass a symmetric matrix, e.g. ({name} + {name}.T) / 2"
        )
    arr = 0.5 * (arr + arr.T)
    if psd:
        from .tolerances import PSD_INPUT_TOL

        tol = PSD_INPUT_TOL if psd_tol is None else psd_tol
        lam_min = float(np.linalg.eigvalsh(arr)[0])
        if lam_min < -tol * float(np.linalg.norm(arr, 2)):
            raise ValueError(
                f"{name} is not positive semidefinite (smallest eigenvalue {lam_min:.3g}); "
                f"project it first, e.g. with cvxmetric.project_psd({name})"
            )
    return arr


def _plain(value):
    """A numpy scalar or 1-D array as a plain Python value or tuple (for readable messages)."""
    if isinstance(value, np.ndarray):
        return tuple(v.item() if isinstance(v, np.generic) else v for v in value)
    return value.item() if isinstance(value, np.generic) else value


def _is_missing_label(value) -> bool:
    """``None`` or a number that is NaN or infinite (any numeric type: float, Decimal, numpy)."""
    if value is None:
        return True
    if isinstance(value, (str, bytes)):
        return False
    try:
        return not math.isfinite(value)
    except (TypeError, ValueError, OverflowError):
        return False


def as_labels(y, n: int | None = None, name: str = "y") -> np.ndarray:
    """Return class labels as a 1-D array (copy), of length ``n`` when given.

    Labels may be integers, strings or any hashable values; NaN, inf and ``None`` are rejected
    (a missing label is not a class: ``NaN != NaN`` would make every such point its own class).
    """
    if isinstance(n, bool) or not (n is None or isinstance(n, (numbers.Integral, np.integer))):
        raise TypeError(f"n must be an integer or None; got {type(n).__name__}")
    try:
        arr = np.array(y, copy=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a 1-D array of labels; got {type(y).__name__}") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D with one label per row of X; got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} labels but X has {n} rows; give one label per row")
    if arr.dtype.kind in "fc":
        missing = ~np.isfinite(arr)
    elif arr.dtype.kind == "O":
        missing = np.array([_is_missing_label(v) for v in arr], dtype=bool).reshape(arr.shape)
    else:
        missing = np.zeros(arr.shape, dtype=bool)
    if np.any(missing):
        q = int(np.argmax(missing))
        raise ValueError(
            f"{name} contains a missing or non-finite label ({name}[{q}] = {_plain(arr[q])!r}); every point "
            "needs a class: drop the unlabelled rows (and the matching rows of X) first"
        )
    return arr


#: The largest index an int32 index array holds (:func:`index_dtype`).
INT32_INDEX_MAX = int(np.iinfo(np.int32).max)


def index_dtype(largest: int) -> type:
    """The dtype of an index array whose entries lie in ``[-1, largest]``: ``np.int32`` when
    ``largest`` fits (``<= INT32_INDEX_MAX``), else ``np.int64``.

    Index arrays (constraint endpoints, pair ids, positions of rows) take half the memory of int64
    in int32: 10^7 quadruplets hold 4 x 10^7 point indices, 160 MB instead of 320 MB. Arithmetic
    on such indices that can exceed ``largest`` (a key ``a * n + b``) casts to int64 first.
    """
    return np.int32 if int(largest) <= INT32_INDEX_MAX else np.int64


def as_index_array(idx, width: int, name: str, *, n: int | None = None, compact: bool = False) -> np.ndarray:
    """Return row indices as a fresh integer array of shape (m, ``width``): int64, or with
    ``compact`` the dtype :func:`index_dtype` gives for the largest entry (int32 below 2^31).

    Integer arrays are taken as they are; float arrays are accepted when every entry is a whole
    number (indices read from a text file), anything else is a TypeError. An empty input of any
    shape gives shape (0, ``width``). With ``n``, every index must lie in ``[0, n)``.

    Raises
    ------
    TypeError
        Non-integer entries (e.g. ``2.5``, NaN, strings, complex).
    ValueError
        Wrong shape, a negative index or one ``>= n``.
    """
    try:
        arr = np.asarray(idx)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an integer array of shape (m, {width}); got {type(idx).__name__}") from exc
    if arr.size == 0:
        return np.zeros((0, width), dtype=np.int32 if compact else np.int64)
    if arr.ndim != 2 or arr.shape[1] != width:
        raise ValueError(f"{name} must have shape (m, {width}); got {arr.shape}")
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold integer row indices; got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        whole = np.isfinite(arr) & (arr == np.round(arr))
        if not np.all(whole):
            q = tuple(int(v) for v in np.argwhere(~whole)[0])
            raise TypeError(f"{name} must hold integer row indices; entry {q} is {_plain(arr[q])!r}: "
                            f"pass whole numbers (e.g. {name}.astype(int) if they are)")
    # the range first, on the input, so that the one copy has its final dtype
    if arr.min() < 0:
        q = int(np.argmax(np.any(arr < 0, axis=1)))
        raise ValueError(f"{name} row {q} = {_plain(arr[q].astype(np.int64))} holds a negative index; indices "
                         "must be non-negative row numbers of X, counted from 0")
    largest = int(arr.max())
    if largest > np.iinfo(np.int64).max or (n is not None and largest >= n):
        bound = np.iinfo(np.int64).max if n is None else n - 1
        q = int(np.argmax(np.any(arr > bound, axis=1)))
        if n is None:
            raise ValueError(f"{name} row {q} holds the index {int(arr[q].max())}, beyond int64; indices are "
                             "row numbers of X")
        raise ValueError(f"{name} row {q} = {_plain(arr[q].astype(np.int64))} indexes a row >= n = {n} "
                         "(X has only n rows)")
    return np.array(arr, dtype=index_dtype(largest) if compact else np.int64, copy=True)


def zero_length_mask(diffs, X) -> np.ndarray:
    r"""Which difference vectors :math:`x_i - x_j` are zero up to round-off (duplicate points).

    Parameters
    ----------
    diffs : array_like, shape (m, d)
        Difference vectors of rows of ``X`` (formed by subtraction, not from a Gram matrix).
    X : array_like, shape (n, d)
        The data they come from.

    Returns
    -------
    ndarray of bool, shape (m,)
        ``True`` where every coordinate satisfies
        :math:`|(x_i - x_j)_t| \le \mathrm{ZERO\_LENGTH\_RTOL} \cdot \max_r |X_{rt}|`.

    Notes
    -----
    The test is per feature, relative to that feature's magnitude, so it is invariant under
    ``X -> X @ diag(s)`` for any positive scales ``s``: rescaling one feature (units, feature scales
    spanning 1e-4..1e4, or all of ``X`` by 1e-6) never turns distinct points into "duplicates",
    and two rows differing only in a small-scale feature stay distinct. A test on the squared
    length against a scale of the whole data would not be: there a feature of scale 1e-4 next to
    one of 1e4 sits 16 orders of magnitude below the largest squared length. The one place where
    this is the wrong test is an ``X`` whose columns are mixed afterwards; callers pass the ``X``
    whose rows were subtracted (e.g. ``X @ L.T`` for transformed data).
    """
    D = np.asarray(diffs, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    if D.ndim != 2 or X.ndim != 2 or D.shape[1] != X.shape[1]:
        raise ValueError(f"diffs must have shape (m, {X.shape[-1]}) to match X; got {D.shape}")
    if D.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    col_scale = np.max(np.abs(X), axis=0) if X.shape[0] else np.zeros(X.shape[1])
    return np.all(np.abs(D) <= ZERO_LENGTH_RTOL * col_scale, axis=1)


def as_rng(seed) -> np.random.Generator:
    """Turn ``None``, an int seed or a Generator into a ``numpy.random.Generator``."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, (numbers.Integral, np.integer)):
        return np.random.default_rng(seed)
    raise TypeError(f"seed must be None, an int or a numpy.random.Generator; got {type(seed).__name__}")


def check_bool(value, name: str) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (also ``numpy.bool_``); else TypeError.

    Truthiness is not accepted: ``"no"``, ``"False"``, ``0`` or ``None`` passed for a flag are
    more likely mistakes than choices, and ``"no"`` would silently count as true.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False; got {value!r} ({type(value).__name__})")


def check_positive(value, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as float, checking it is finite and > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite; got {value}")
    if allow_zero and v < 0:
        raise ValueError(f"{name} must be >= 0; got {value}")
    if not allow_zero and v <= 0:
        raise ValueError(f"{name} must be > 0; got {value}")
    return v


def check_nonnegative(value, name: str) -> float:
    """Return ``value`` as float, checking it is finite and >= 0."""
    return check_positive(value, name, allow_zero=True)


def check_int_in_range(value, name: str, low: int, high: int | None = None) -> int:
    """Return ``value`` as int, checking it is an integer with ``low <= value <= high``.

    ``high=None`` means no upper limit. Bools and floats (even ``10.0``) are a TypeError naming
    the argument, so a count such as ``m`` never reaches numpy as a float or a flag.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        hint = f": pass int({name})" if isinstance(value, (float, np.floating)) else ""
        raise TypeError(f"{name} must be an integer; got {value!r} ({type(value).__name__}){hint}")
    v = int(value)
    if high is None and v < low:
        raise ValueError(f"{name} must be >= {low}; got {v}")
    if high is not None and not low <= v <= high:
        raise ValueError(f"{name} must be in [{low}, {high}]; got {v}")
    return v


def broadcast_vector(value, m: int, name: str) -> np.ndarray:
    """A fresh finite float array of shape (m,) from a scalar or an array of that shape."""
    arr = np.array(value, dtype=np.float64, copy=True)
    if arr.ndim == 0:
        arr = np.full(m, float(arr))
    if arr.shape != (m,):
        raise ValueError(f"{name} must be a scalar or have shape ({m},); got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf; pass finite values")
    return arr


def keyword_options(fn: Callable, *, exclude: Collection[str] = ()) -> frozenset:
    """The names ``fn`` accepts as keyword arguments, minus ``exclude``.

    The first parameter (the model or data a solver is applied to) and ``*args`` / ``**kwargs``
    are not options. A facade builds the option set of each method from the signature of the
    function that method calls, so the set cannot drift from what the function reads.
    """
    params = list(inspect.signature(fn).parameters.values())[1:]
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(q.name for q in params if q.kind in kinds and q.name not in exclude)


def check_method_options(function: str, method, options: Mapping, accepted: Mapping[str, Collection[str]]) -> str:
    """Validate ``method`` and reject every option the chosen method would not read.

    Parameters
    ----------
    function : str
        Name of the facade, for the messages (e.g. ``"solve_lmnn"``).
    method : str
        The ``method=`` argument given.
    options : Mapping
        The options given (only those the caller passed: a named parameter with a method-specific
        meaning belongs here when it was given, e.g. with a ``None`` default).
    accepted : Mapping of str to collection of str
        For each method name, the options it reads (e.g. :func:`keyword_options` of the function
        it calls).

    Returns
    -------
    str
        ``method``, validated.

    Raises
    ------
    ValueError
        For an unknown method, and for an option the chosen method does not read: the message
        names the option and the method, and the methods that do read it (an ignored option is
        an error, never silently dropped).
    """
    if not isinstance(method, str) or method not in accepted:
        raise ValueError(f"{function}: method must be one of {tuple(accepted)}; got {method!r}")
    for name in options:
        if name in accepted[method]:
            continue
        readers = [m for m, names in accepted.items() if name in names]
        if readers:
            raise ValueError(f"{function}: option {name!r} does not apply to method={method!r} (only to "
                             f"method={' or '.join(map(repr, readers))}); remove it or choose that method")
        raise ValueError(f"{function}: unknown option {name!r} for method={method!r}; its options are "
                         f"{', '.join(sorted(accepted[method])) or 'none'}")
    return method


def argument_type(convert: Callable[[str], object], accept: Callable[[object], bool], what: str, *,
                  name: str = "") -> Callable[[str], object]:
    """An argparse ``type=``: ``convert(text)``, kept when ``accept(value)``; otherwise a usage error
    (argparse exits 2, naming the argument) saying what was expected: "[name ]must be {what}"."""
    prefix = f"{name} " if name else ""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{prefix}must be {what}; got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{prefix}must be {what}; got {text}")
        return value

    parse.__name__ = what
    return parse
