"""Default ITML instances (design §5.3): labelled pairs with the default squared-length bounds.

Each instance draws similar pairs (same label) and dissimilar pairs (different labels) with a
fixed seed, sets ``u, l`` to the 5th/95th percentiles of the pairs' *squared* lengths
(:func:`cvxmetric.itml.default_bounds`) and stores them as the margins of a pairwise
:class:`~cvxmetric.constraints.ConstraintSet`, so the instance's constraints alone define the
model (``params`` hold ``gamma`` and, for the synthetic one, a non-identity ``prior``). The
optimum is clearly positive (the LogDet term is > 0 unless the prior already satisfies every
bound), so relative gaps are meaningful.
"""
from __future__ import annotations

import numpy as np

from ..constraints import ConstraintSet
from ..datasets import load_dataset
from ..generators import pairs_from_labels
from ..itml import default_bounds
from ..linalg import random_psd
from .._checks import zero_length_mask
from . import Instance, register, shifted_seed

__all__ = ["itml_pairs", "itml_instance"]


def itml_pairs(X, y, *, n_similar: int, n_dissimilar: int, seed) -> ConstraintSet:
    """Labelled pairs with ITML's default bounds (squared-length percentiles) as margins.

    Pairs joining duplicate points (iris has two identical rows, 101 and 142) are dropped: ITML
    rejects zero-length pairs (the relative test :func:`cvxmetric._checks.zero_length_mask`).
    """
    raw = pairs_from_labels(y, n_similar=n_similar, n_dissimilar=n_dissimilar, u=0.0, l=0.0, seed=seed)
    X = np.asarray(X, dtype=np.float64)

    def nonzero(P):
        diff = X[P[:, 0]] - X[P[:, 1]]
        return P[~zero_length_mask(diff, X)]

    S = nonzero(raw.idx[raw.is_similar][:, :2])
    D = nonzero(raw.idx[raw.is_dissimilar][:, 2:])
    u, l = default_bounds(X, S, D)
    return (ConstraintSet.from_pairs(S, similar=True, bound=u)
            + ConstraintSet.from_pairs(D, similar=False, bound=l))


def itml_instance(name: str, X, y, *, n_similar: int, n_dissimilar: int, seed: int, gamma: float = 1.0,
                  prior=None, description: str = "") -> Instance:
    """An ITML :class:`~cvxmetric.instances.Instance` (pairs from labels, default bounds)."""
    cons = itml_pairs(X, y, n_similar=n_similar, n_dissimilar=n_dissimilar, seed=seed)
    params = {"gamma": gamma}
    if prior is not None:
        params["prior"] = prior
    u, l = -cons.delta[cons.is_similar][0], cons.delta[cons.is_dissimilar][0]
    ns, nd = int(cons.is_similar.sum()), int(cons.is_dissimilar.sum())
    return Instance("itml", name, X, cons, params=params, y=y,
                    description=f"{description}, {ns}+{nd} pairs, u={u:.3g}, l={l:.3g}, "
                                f"gamma={gamma:g}")


@register("itml", "iris")
def _iris(seed: int = 0) -> Instance:
    X, y = load_dataset("iris")
    return itml_instance("iris", X, y, n_similar=100, n_dissimilar=100, seed=shifted_seed(31, seed), gamma=1.0,
                         description="iris (standardized), identity prior")


@register("itml", "wine")
def _wine(seed: int = 0) -> Instance:
    X, y = load_dataset("wine")
    return itml_instance("wine", X, y, n_similar=150, n_dissimilar=150, seed=shifted_seed(32, seed), gamma=1.0,
                         description="wine (standardized), identity prior")


@register("itml", "syn-d8")
def _syn_d8(seed: int = 0) -> Instance:
    """Three overlapping anisotropic Gaussian classes in d = 8, a random positive definite prior."""
    rng = np.random.default_rng(shifted_seed(33, seed))
    d, n_per = 8, 60
    A = rng.standard_normal((d, d)) / np.sqrt(d)
    centers = 1.5 * rng.standard_normal((3, d))
    X = np.concatenate([c + rng.standard_normal((n_per, d)) @ A for c in centers])
    y = np.repeat(np.arange(3), n_per)
    prior = random_psd(d, seed=rng) + 0.5 * np.eye(d)
    return itml_instance("syn-d8", X, y, n_similar=200, n_dissimilar=200, seed=shifted_seed(34, seed), gamma=0.5, prior=prior,
                         description="synthetic 3-class Gaussians d=8, random PD prior")
