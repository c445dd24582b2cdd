"""metric-learn's constructor parameters, given their meaning for a convex problem solved to a certificate.

* ``init`` is the solver's start (from metric-learn's initial map ``L0``, chosen by
  :func:`initial_components` with metric-learn's ``"auto"`` rule; LMNN starts from the direction
  ``L0.T @ L0`` scaled to the data's units; the identity leaves the start to the solver, which on
  many points starts from a subsample's solution): a convex problem has the same optimum from any start,
  so ``init`` changes the iterations, never the certified result beyond its tolerance.
* ``n_components`` keeps the ``n_components`` leading eigen-directions of the certified ``M`` in
  ``components_`` (see :func:`truncated_components`).
* ``verbose`` prints the fit's certificate (:func:`report_fit`).
* parameters of metric-learn's own non-convex optimiser (a step size, a least iteration count)
  have no counterpart and are ignored with one warning when set (:func:`warn_ignored`).
"""
from __future__ import annotations

import numbers
import warnings
from typing import Optional

import numpy as np

from cvxmetric._checks import as_rng

from ._inputs import ndim

__all__ = ["INITS", "auto_init", "initial_components", "start_from_metric", "truncated_components", "warn_ignored", "report_fit",
           "check_n_components"]

#: metric-learn's named initialisations of ``L``, in its order (an array (k, d) is also accepted);
#: ``"lda"`` needs class labels.
INITS = ("auto", "pca", "identity", "random", "lda")


def check_n_components(n_components, d: int) -> Optional[int]:
    """``n_components`` validated against the ``d`` features: None or an int in [1, d].

    The message is metric-learn's, word for word (code written for metric-learn may match it).
    """
    if n_components is None:
        return None
    if isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral) or not 1 <= n_components <= d:
        raise ValueError(f"Invalid n_components, must be in [1, {d}]")
    return int(n_components)


def auto_init(n_samples: int, d: int, n_components: Optional[int], n_classes: Optional[int]) -> str:
    """metric-learn's choice of ``init="auto"``: ``"lda"``, ``"pca"`` or ``"identity"``.

    With ``k = n_components`` (``d`` when None): ``"lda"`` when there are class labels and
    ``k <= min(d, n_classes - 1)`` (the discriminant directions are enough); else ``"pca"`` when
    ``k < min(d, n_samples)`` (the leading principal axes); else ``"identity"``.
    ``n_classes``: None for a learner without class labels.
    """
    k = d if n_components is None else n_components
    if n_classes is not None and k <= min(d, n_classes - 1):
        return "lda"
    if k < min(d, n_samples):
        return "pca"
    return "identity"


def _check_init_array(init, d: int, n_components: Optional[int]) -> np.ndarray:
    """An ``init`` array ``L0`` (k, d) checked as metric-learn checks it, with its messages word for word."""
    L0 = np.array(init, dtype=np.float64)
    if L0.ndim != 2 or not np.all(np.isfinite(L0)):
        raise ValueError(f"init as an array must be a finite linear map L0 of shape (n_components, {d}); got "
                         f"shape {L0.shape}")
    if L0.shape[1] != d:
        raise ValueError(f"The input dimensionality ({L0.shape[1]}) of the given linear transformation `init` must "
                         f"match the dimensionality of the given inputs `X` ({d}).")
    if L0.shape[0] > L0.shape[1]:
        raise ValueError(f"The output dimensionality ({L0.shape[0]}) of the given linear transformation `init` "
                         f"cannot be greater than its input dimensionality ({L0.shape[1]}).")
    k = d if n_components is None else n_components
    if L0.shape[0] != k:
        raise ValueError(f"The preferred dimensionality of the projected space `n_components` ({k}) does not match "
                         f"the output dimensionality of the given linear transformation `init` ({L0.shape[0]})!")
    return L0


def initial_components(init, X: np.ndarray, y, n_components: Optional[int], random_state) -> np.ndarray:
    """metric-learn's initial linear map ``L0`` (k, d) of ``init``, ``k = n_components`` (``d`` when None).

    Parameters
    ----------
    init : {"auto", "identity", "random", "pca", "lda"} or array (k, d)
        ``"auto"``: the name :func:`auto_init` chooses (metric-learn's rule); ``"identity"``: the
        first ``k`` rows of ``I``; ``"random"``: Gaussian entries drawn with ``random_state``;
        ``"pca"``: the leading ``k`` principal axes of ``X``; ``"lda"``: the leading
        ``min(k, n_classes - 1)`` linear discriminant directions of ``(X, y)``; an array: ``L0``
        itself (its rows must number ``k``).
    X : ndarray (n, d)
    y : array (n,) or None
        Class labels (None: ``"lda"`` is not available).
    """
    n, d = X.shape
    k = d if n_components is None else n_components
    if not isinstance(init, str) and ndim(init) == 2:
        return _check_init_array(init, d, n_components)
    names = INITS if y is not None else INITS[:-1]
    if not isinstance(init, str) or init not in names:    # metric-learn's message, word for word
        raise ValueError("`init` must be '{}' or a numpy array of shape (n_components, n_features)."
                         .format("', '".join(names)))
    if init == "auto":
        init = auto_init(n, d, n_components, None if y is None else len(np.unique(y)))
    if init == "identity":
        return np.eye(k, d)
    if init == "random":
        return as_rng(random_state).standard_normal((k, d))
    if init == "pca":
        from sklearn.decomposition import PCA
        return PCA(n_components=k, svd_solver="full").fit(X).components_
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    n_dirs = min(k, len(np.unique(y)) - 1)
    return LinearDiscriminantAnalysis(n_components=n_dirs).fit(X, y).scalings_[:, :n_dirs].T


def start_from_metric(init, X: np.ndarray, random_state) -> Optional[np.ndarray]:
    """The solver's start ``M0`` from metric-learn's ``init`` of a Mahalanobis matrix (MMC).

    None: the solver's own start; ``"identity"``; ``"covariance"`` (the inverse covariance of
    ``X``; its pseudo-inverse, with a ``UserWarning``, when singular); ``"random"`` (a random
    positive definite matrix drawn with ``random_state``); or a positive definite array (d, d)
    (:func:`cvxmetric.estimators._priors.prior_matrix`).
    """
    from ._priors import SingularPriorError, prior_matrix
    if init is None:
        return None
    if isinstance(init, str) and init == "identity":
        return np.eye(X.shape[1])
    try:
        return prior_matrix(init, X, random_state, name="init")
    except SingularPriorError:
        if not (isinstance(init, str) and init == "covariance"):
            raise
    # a start needs only to be PSD: the pseudo-inverse of a singular covariance serves (metric-learn's
    # warning, word for word: it names the fix)
    warnings.warn("The covariance matrix is not invertible: using the pseudo-inverse instead.To make the covariance "
                  "matrix invertible you can remove any linearly dependent features and/or reduce the dimensionality "
                  "of your input, for instance using `sklearn.decomposition.PCA` as a preprocessing step.",
                  UserWarning, stacklevel=4)
    return np.linalg.pinv(np.atleast_2d(np.cov(X, rowvar=False)), hermitian=True)


def truncated_components(L: np.ndarray, n_components: Optional[int]) -> np.ndarray:
    """The first ``n_components`` rows of ``L`` (rows by decreasing eigenvalue of ``M = L.T @ L``).

    ``L_k.T @ L_k`` is the best rank-``k`` approximation of the certified ``M`` (Eckart-Young, in
    every unitarily invariant norm); it is not an optimum of the rank-constrained problem, which
    is not convex. ``certificate_`` and ``result_`` describe the full ``M``.
    """
    return L if n_components is None else L[:n_components].copy()


def warn_ignored(estimator, defaults: dict) -> None:
    """One ``UserWarning`` naming the parameters of metric-learn's optimiser set away from ``defaults``."""
    set_names = [name for name, default in defaults.items() if getattr(estimator, name) is not default
                 and getattr(estimator, name) != default]
    if set_names:
        kind = "a parameter" if len(set_names) == 1 else "parameters"
        warnings.warn(f"{type(estimator).__name__}: {', '.join(set_names)} ({kind} of metric-learn's own "
                      "optimiser) ignored: the certified convex solve has no counterpart; tol and max_iter "
                      "control the solver", UserWarning, stacklevel=3)


def report_fit(estimator) -> None:
    """Print the fitted estimator's solver, iterations and certificate (``verbose=True``)."""
    c = estimator.certificate_
    print(f"[{type(estimator).__name__}] solver={c.solver} iterations={estimator.n_iter_} {c.measure}={c.value:.3g} "
          f"(tol {c.tol:.3g}) objective={c.objective:.6g} certified={c.certified}")
