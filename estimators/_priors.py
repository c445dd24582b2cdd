"""ITML's prior metric from metric-learn's names: ``"identity"``, ``"covariance"``, ``"random"`` or a matrix."""
from __future__ import annotations

from typing import Optional

import numpy as np

from cvxmetric._checks import as_rng

__all__ = ["PRIORS", "SingularPriorError", "prior_matrix"]

#: The named priors (metric-learn's strings); an array (d, d) is also accepted.
PRIORS = ("identity", "covariance", "random")

#: A prior is definite when its smallest eigenvalue exceeds this fraction of its largest: the rule
#: of the ITML model (:class:`cvxmetric.itml.ITMLModel` rejects a prior below it as numerically
#: singular), checked here first so that every singular prior is a :class:`SingularPriorError`.
PRIOR_DEFINITE_RTOL = 1e-12

#: Eigenvalues of the ``"random"`` prior are drawn uniformly from this range: condition at most 2,
#: so the random prior is always well inside the definite matrices.
RANDOM_PRIOR_EIGENVALUES = (1.0, 2.0)


class SingularPriorError(np.linalg.LinAlgError, ValueError):
    """The prior metric of ITML is not positive definite (a ``numpy.linalg.LinAlgError``, as
    metric-learn raises, and a ``ValueError``, as every other bad input here)."""


def _is_definite(M0: np.ndarray) -> bool:
    lam = np.linalg.eigvalsh(M0)
    return bool(np.all(np.isfinite(lam)) and lam[-1] > 0 and lam[0] > PRIOR_DEFINITE_RTOL * lam[-1])


def _random_prior(d: int, random_state) -> np.ndarray:
    """A random positive definite matrix: random orthonormal eigenvectors (QR of a Gaussian matrix)
    and eigenvalues uniform in :data:`RANDOM_PRIOR_EIGENVALUES`."""
    rng = as_rng(random_state)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = rng.uniform(*RANDOM_PRIOR_EIGENVALUES, size=d)
    M0 = (Q * lam) @ Q.T
    return 0.5 * (M0 + M0.T)


def prior_matrix(prior, X: np.ndarray, random_state, name: str = "prior") -> Optional[np.ndarray]:
    """ITML's prior :math:`M_0` for the points ``X`` (n, d): None for the identity, else a matrix.

    Parameters
    ----------
    prior : None, "identity", "covariance", "random" or array (d, d)
        ``"covariance"``: the inverse of the covariance of ``X`` (the training points);
        ``"random"``: a random positive definite matrix drawn with ``random_state``.
    X : ndarray, shape (n, d)
    random_state : None, int or Generator
    name : str
        The parameter's name in the messages (``"prior"``, or ``"init"`` for MMC's start).

    Raises
    ------
    SingularPriorError
        When the prior (or the covariance of ``X``) is not positive definite.
    ValueError
        For another name, a matrix of another shape or an asymmetric one.

    Notes
    -----
    The messages are metric-learn's, word for word (code written for metric-learn may match them):
    each names the parameter and what to pass instead.
    """
    d = X.shape[1]
    if prior is None or (isinstance(prior, str) and prior == "identity"):
        return None
    if isinstance(prior, str) and prior == "covariance":
        cov = np.atleast_2d(np.cov(X, rowvar=False))
        if not _is_definite(cov):
            raise SingularPriorError(f"Unable to get a true inverse of the covariance matrix since it is not "
                                     f"definite. Try another `{name}`, or an algorithm that does not require the "
                                     f"`{name}` to be strictly positive definite.")
        inverse = np.linalg.inv(cov)
        return 0.5 * (inverse + inverse.T)
    if isinstance(prior, str) and prior == "random":
        return _random_prior(d, random_state)
    if isinstance(prior, str):
        raise ValueError(f"`{name}` must be 'identity', 'covariance', 'random' or a numpy array of shape "
                         "(n_features, n_features).")
    M0 = np.array(prior, dtype=np.float64)
    if M0.shape != (d, d):
        raise ValueError(f"The input dimensionality {M0.shape} of the given mahalanobis matrix `{name}` must match "
                         f"the dimensionality of the given inputs ({d}).")
    if not np.allclose(M0, M0.T):
        raise ValueError(f"`{name}` is not symmetric.")
    if not _is_definite(M0):
        raise SingularPriorError(f"You should provide a strictly positive definite matrix as `{name}`. This one is "
                                 f"not definite. Try another {name}, or an algorithm that does not require the "
                                 f"{name} to be strictly positive definite.")
    return M0
