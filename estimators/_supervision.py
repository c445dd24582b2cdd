"""Constraints drawn from class labels for the ``*_Supervised`` estimators (seeded)."""
from __future__ import annotations

import numpy as np

from cvxmetric._checks import as_rng
from cvxmetric.generators import pairs_from_labels

__all__ = ["label_pairs", "default_n_constraints"]


def default_n_constraints(y) -> int:
    """metric-learn's default: ``20 * n_classes**2`` pairs of each kind."""
    return 20 * len(np.unique(y)) ** 2


def label_pairs(y, n_constraints, random_state) -> tuple[np.ndarray, np.ndarray]:
    """``n_constraints`` similar and as many dissimilar pairs (fewer when fewer exist), as (S, D).

    Drawn uniformly without replacement by :func:`cvxmetric.generators.pairs_from_labels` with the
    estimator's ``random_state``, each list in random order (the generator returns them sorted), so
    that zipping ``S[:m]`` with ``D[:m]`` pairs them at random and a prefix is a uniform subset.
    """
    y = np.asarray(y)
    n = default_n_constraints(y) if n_constraints is None else n_constraints
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n_constraints must be a positive integer or None (20 * n_classes**2); got {n!r}")
    _, counts = np.unique(y, return_counts=True)
    if counts.size < 2:
        raise ValueError(f"y has a single class ({counts.size} class); pairs from labels need at least two classes")
    total = y.size * (y.size - 1) // 2
    same = int(np.sum(counts * (counts - 1) // 2))
    if same == 0:
        raise ValueError("no class has two points, so there is no similar pair; give at least two points in a class")
    rng = as_rng(random_state)
    cons = pairs_from_labels(y, n_similar=min(int(n), same), n_dissimilar=min(int(n), total - same), u=0.0, l=0.0,
                             seed=rng)
    S = cons.idx[cons.is_similar][:, :2]
    D = cons.idx[cons.is_dissimilar][:, 2:]
    return S[rng.permutation(len(S))], D[rng.permutation(len(D))]
