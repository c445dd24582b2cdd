"""Default MMC instances: similar/dissimilar pairs from labels.

The dissimilar pairs get weight 1/|D| (the constraint asks the *mean* dissimilar distance to be
at least 1). This is eq. 1.3 up to the scale identity (its optimum times |D|^2) and keeps the
optimum O(1), so relative gaps and Clarabel's tolerances are meaningful (with weight 1 the
optimum is ~1e-4 and a 1e-7 solver tolerance is a 1e-3 relative error).
"""
from __future__ import annotations

import numpy as np

from ..datasets import load_dataset
from ..generators import pairs_from_labels
from . import Instance, register, shifted_seed


def mmc_pairs(y, n_similar: int, n_dissimilar: int, seed):
    """Similar/dissimilar pairs from labels, the dissimilar ones weighted ``1 / n_dissimilar``."""
    cons = pairs_from_labels(y, n_similar=n_similar, n_dissimilar=n_dissimilar, u=0.0, l=0.0, seed=seed)
    return cons.with_weight(np.where(cons.is_dissimilar, 1.0 / n_dissimilar, 1.0))


def mmc_instance(name: str, X, y, n_pairs: int, seed: int, description: str, problem: str = "mmc") -> Instance:
    """``n_pairs`` similar and as many dissimilar pairs of (X, y) as an MMC instance (``problem``:
    ``"mmc"`` or ``"mmc_diagonal"``, the same pairs)."""
    cons = mmc_pairs(y, n_pairs, n_pairs, seed)
    return Instance(problem, name, X, cons, params={}, y=y, description=description)


@register("mmc", "iris")
def _iris(seed: int = 0) -> Instance:
    X, y = load_dataset("iris")
    return mmc_instance("iris", X, y, 100, shifted_seed(1, seed), "iris (standardized), 100 similar + 100 dissimilar pairs, d=4")


@register("mmc", "wine")
def _wine(seed: int = 0) -> Instance:
    X, y = load_dataset("wine")
    return mmc_instance("wine", X, y, 150, shifted_seed(2, seed), "wine (standardized), 150 similar + 150 dissimilar pairs, d=13")


@register("mmc", "syn-blobs")
def _blobs(seed: int = 0) -> Instance:
    """Three Gaussian classes, d = 8, axis scales 0.5..2 (C_S condition number ~ 20); a strongly
    anisotropic mix (condition ~ 1e4) makes Clarabel stop "optimal_inaccurate"."""
    rng = np.random.default_rng(shifted_seed(4, seed))
    d = 8
    centers = 0.7 * rng.standard_normal((3, d))
    scale = np.linspace(0.5, 2.0, d)
    X = np.concatenate([c + scale * rng.standard_normal((40, d)) for c in centers])
    y = np.repeat(np.arange(3), 40)
    return mmc_instance("syn-blobs", X, y, 120, shifted_seed(5, seed), "3 Gaussian classes, d=8, axis scales 0.5..2, 120 + 120 pairs")


@register("mmc_diagonal", "iris")
def _iris_diagonal(seed: int = 0) -> Instance:
    X, y = load_dataset("iris")
    return mmc_instance("iris", X, y, 100, shifted_seed(1, seed),
                        "iris (standardized), 100 similar + 100 dissimilar pairs, diagonal M, d=4", "mmc_diagonal")


@register("mmc_diagonal", "wine")
def _wine_diagonal(seed: int = 0) -> Instance:
    X, y = load_dataset("wine")
    return mmc_instance("wine", X, y, 150, shifted_seed(2, seed),
                        "wine (standardized), 150 similar + 150 dissimilar pairs, diagonal M, d=13", "mmc_diagonal")
