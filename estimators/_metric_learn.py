"""metric-learn's constructor parameters, given their meaning for a convex problem solved to a certificate.

* ``init`` is the solver's start (a PSD matrix ``M0 = L0.T @ L0`` from metric-learn's
  initialisations of ``L``): a convex problem has the same optimum from any start, so ``init``
  changes the iterations, never the certified result beyond its tolerance.
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

__all__ = ["INITS", "start_metric", "start_from_metric", "truncated_components", "warn_ignored", "report_fit",
           "check_n_components"]

#: metric-learn's named initialisations of ``L`` (an array (k, d) is also accepted).
INITS = ("auto", "identity", "random", "pca", "lda")


def check_n_components(n_components, d: int) -> Optional[int]:
    """``n_components`` validated against the ``d`` features: None or an int in [1, d]."""
    if n_components is None:
        return None
    if isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral) or not 1 <= n_components <= d:
        raise ValueError(f"n_components must be None or an integer in [1, {d}] (the number of features); "
                         f"got {n_components!r}")
    return int(n_components)


def start_metric(init, X: np.ndarray, y, n_components: Optional[int], random_state) -> Optional[np.ndarray]:
    """The solver's start ``M0 = L0.T @ L0`` from metric-learn's ``init`` (None: the solver's default).

    Parameters
    ----------
    init : {"auto", "identity", "random", "pca", "lda"} or array (k, d)
        ``"auto"``: the solver's own start (scaled to the data's units); ``"identity"``: ``M0 = I``;
        ``"random"``: ``L0`` Gaussian (drawn with ``random_state``); ``"pca"``: ``L0`` the leading
        ``n_components`` principal axes of ``X``; ``"lda"``: the leading linear discriminant
        directions of ``(X, y)``; an array: ``L0`` itself.
    """
    d = X.shape[1]
    k = d if n_components is None else n_components
    if isinstance(init, str) and init == "auto":
        return None
    if isinstance(init, str) and init == "identity":
        return np.eye(d)
    if isinstance(init, str) and init == "random":
        L0 = as_rng(random_state).standard_normal((k, d))
    elif isinstance(init, str) and init == "pca":
        from sklearn.decomposition import PCA
        L0 = PCA(n_components=k).fit(X).components_
    elif isinstance(init, str) and init == "lda":
        from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
        n_dirs = min(k, len(np.unique(y)) - 1)
        L0 = LinearDiscriminantAnalysis(n_components=n_dirs).fit(X, y).scalings_[:, :n_dirs].T
    elif isinstance(init, str):
        raise ValueError(f"init must be one of {INITS} or an array (n_components, {d}); got {init!r}")
    else:
        L0 = np.asarray(init, dtype=np.float64)
        if L0.ndim != 2 or L0.shape[1] != d or not np.all(np.isfinite(L0)):
            raise ValueError(f"init as an array must be a finite linear map L0 of shape (n_components, {d}); "
                             f"got shape {L0.shape}")
    return L0.T @ L0


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
        return prior_matrix(init, X, random_state)
    except SingularPriorError:
        if not (isinstance(init, str) and init == "covariance"):
            raise
    # a start needs only to be PSD: the pseudo-inverse of a singular covariance serves
    warnings.warn("the covariance of X is singular: init='covariance' starts from its pseudo-inverse (remove "
                  "linearly dependent features, e.g. by PCA, for an invertible one)", UserWarning, stacklevel=4)
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
