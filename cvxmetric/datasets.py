"""Bundled data sets (scikit-learn's iris, wine, breast cancer, digits) and synthetic data.

Nothing is downloaded: every loader reads data shipped inside scikit-learn or generates it
from a seed.
"""
from __future__ import annotations

import numpy as np

from ._checks import as_data_matrix, as_rng, check_bool, check_int_in_range
from .linalg import random_psd
from .tolerances import ZERO_LENGTH_RTOL

__all__ = ["load_dataset", "standardize", "synthetic_low_rank_metric", "DATASETS"]

DATASETS = ("iris", "wine", "breast_cancer", "digits")


def standardize(X: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance per column; constant columns become 0. Returns a copy.

    A column is constant when its spread ``max - min`` is at most ``ZERO_LENGTH_RTOL`` times its
    largest magnitude (all its entries are duplicates by the project's relative test, e.g.
    ``[0.1 + 0.2, 0.3]``): dividing such round-off by its own standard deviation would blow it up
    into a unit-variance noise feature.
    """
    X = as_data_matrix(X)
    mu = X.mean(axis=0)
    sd = X.std(axis=0)
    constant = np.ptp(X, axis=0) <= ZERO_LENGTH_RTOL * np.max(np.abs(X), axis=0)
    sd[constant] = 1.0
    out = (X - mu) / sd
    out[:, constant] = 0.0
    return out


def load_dataset(name: str, *, standardized: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Load one of scikit-learn's bundled data sets as ``(X, y)``.

    Parameters
    ----------
    name : {"iris", "wine", "breast_cancer", "digits"}
    standardized : bool
        Standardize columns (digits: scaled to [0, 1] instead, pixels share one unit).
    """
    from sklearn import datasets as skd

    loaders = {"iris": skd.load_iris, "wine": skd.load_wine,
               "breast_cancer": skd.load_breast_cancer, "digits": skd.load_digits}
    standardized = check_bool(standardized, "standardized")
    if not isinstance(name, str) or name not in loaders:
        raise ValueError(f"unknown data set {name!r}; choose one of {', '.join(DATASETS)}")
    bunch = loaders[name]()
    X = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target)
    if standardized:
        X = X / 16.0 if name == "digits" else standardize(X)
    return X, y


def synthetic_low_rank_metric(n: int, d: int, e: int, *, seed=None) -> tuple[np.ndarray, np.ndarray]:
    r"""The thesis' synthetic set-up (sec. 3.4.1): :math:`x \sim U[0, 1)^d` and
    :math:`T = \mathrm{blockdiag}(A, 0)` with a random positive definite :math:`A \in S^e_{++}`.

    Returns
    -------
    X : ndarray, shape (n, d)
    T : ndarray, shape (d, d), rank ``e``
    """
    n = check_int_in_range(n, "n", 1)
    d = check_int_in_range(d, "d", 1, 10**6)
    e = check_int_in_range(e, "e", 1, d)
    rng = as_rng(seed)
    X = rng.random((n, d))
    A = random_psd(e, rank=e + 2, seed=rng) + 1e-2 * np.eye(e)
    T = np.zeros((d, d))
    T[:e, :e] = A
    return X, T
