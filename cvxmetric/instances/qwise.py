"""Default Qwise instances (full-matrix and vector models).

Every instance has a clearly positive optimum (label noise or non-separable constraints plus a
regularizer), so relative gaps are meaningful (design §6).
"""
from __future__ import annotations

import numpy as np

from ..constraints import ConstraintSet
from ..datasets import load_dataset, synthetic_low_rank_metric
from ..generators import pairs_from_labels, quadruplets_from_metric, relative_attribute_quadruplets
from . import Instance, register, shifted_seed


def synthetic_qwise(d: int, e: int, n: int, m: int, *, seed: int, flip: float = 0.1,
                    regularizer: str = "trace", name: str | None = None, C_Q: float = 1.0,
                    reg_weight: float = 1.0) -> Instance:
    """Thesis 3.4.1-style data: U[0,1)^d points, quadruplets labelled by a rank-e metric T,
    a fraction ``flip`` of them reversed (label noise)."""
    X, T = synthetic_low_rank_metric(n, d, e, seed=seed)
    cons = quadruplets_from_metric(X, T, m, seed=seed + 1, flip_fraction=flip)
    return Instance("qwise", name or f"syn-d{d}-m{m}", X, cons,
                    params={"regularizer": regularizer, "C_Q": C_Q, "C_P": 1.0, "reg_weight": reg_weight},
                    description=f"synthetic rank-{e} target, d={d}, {len(cons)} quadruplets, {flip:.0%} flipped",
                    extra={"T": T})


@register("qwise", "syn-d5")
def _syn_d5(seed: int = 0) -> Instance:
    return synthetic_qwise(5, 2, 80, 300, seed=shifted_seed(5, seed), regularizer="trace", name="syn-d5", C_Q=10.0)


@register("qwise", "syn-d20")
def _syn_d20(seed: int = 0) -> Instance:
    return synthetic_qwise(20, 4, 400, 2000, seed=shifted_seed(20, seed), regularizer="frobenius", name="syn-d20", C_Q=0.3)


@register("qwise", "iris-mixed")
def _iris_mixed(seed: int = 0) -> Instance:
    """Iris (standardized): similar/dissimilar pairs plus triplets from labels, trace regularizer."""
    X, y = load_dataset("iris")
    rng = np.random.default_rng(shifted_seed(4, seed))
    pairs = pairs_from_labels(y, n_similar=150, n_dissimilar=150, u=1.0, l=4.0, seed=rng)
    n = X.shape[0]
    i = rng.integers(0, n, 400)
    same = np.array([rng.choice(np.flatnonzero((y == y[a]) & (np.arange(n) != a))) for a in i])
    other = np.array([rng.choice(np.flatnonzero(y != y[a])) for a in i])
    trip = ConstraintSet.from_triplets(np.column_stack([i, same, other]), delta=1.0)
    return Instance("qwise", "iris-mixed", X, pairs + trip,
                    params={"regularizer": "trace", "C_Q": 1.0, "C_P": 1.0, "reg_weight": 1.0},
                    y=y, description="iris, 300 labelled pairs (u=1, l=4) + 400 triplets, trace")


@register("qwise", "syn-d50-m1000", default=False)
def _syn_d50_1k(seed: int = 0) -> Instance:
    return synthetic_qwise(50, 10, 2000, 1000, seed=shifted_seed(50, seed), regularizer="trace", name="syn-d50-m1000", C_Q=1.0)


@register("qwise", "syn-d50-m10000", default=False)
def _syn_d50_10k(seed: int = 0) -> Instance:
    return synthetic_qwise(50, 10, 8000, 10000, seed=shifted_seed(51, seed), regularizer="trace", name="syn-d50-m10000", C_Q=1.0)


# ----------------------------------------------------------------------------- vector model
@register("qwise_vector", "diag-d10")
def _vec_diag(seed: int = 0) -> Instance:
    """Diagonal metric (w >= 0) from pairs and quadruplets on synthetic data."""
    X, T = synthetic_low_rank_metric(200, 10, 3, seed=shifted_seed(7, seed))
    T = np.diag(np.diag(T))
    quads = quadruplets_from_metric(X, T, 600, seed=shifted_seed(8, seed), flip_fraction=0.1)
    rng = np.random.default_rng(shifted_seed(9, seed))
    y = (X[:, 0] > 0.5).astype(int) + 2 * (X[:, 1] > 0.5).astype(int)
    pairs = pairs_from_labels(y, n_similar=150, n_dissimilar=150, u=0.0, l=0.0, seed=rng)
    return Instance("qwise_vector", "diag-d10", X, quads + pairs,
                    params={"diagonal": True, "C_Q": 1.0, "C_P": 1.0, "h": 0.05},
                    description="diagonal model, d=10, 600 quadruplets + 300 pairs")


@register("qwise_vector", "relattr-d8")
def _vec_relattr(seed: int = 0) -> Instance:
    """Relative attributes (linear model, signed D_w): 6 classes ordered by a hidden direction."""
    rng = np.random.default_rng(shifted_seed(11, seed))
    n_per, d = 40, 8
    direction = rng.standard_normal(d)
    centers = np.outer(np.array([0, 1, 2, 2, 3, 4], dtype=float), direction / np.linalg.norm(direction))
    X = np.concatenate([c + 0.8 * rng.standard_normal((n_per, d)) for c in centers])
    y = np.repeat(np.arange(6), n_per)
    levels = [[0], [1], [2, 3], [4], [5]]
    strict = relative_attribute_quadruplets(y, levels, 500, kind="strict", seed=shifted_seed(12, seed))
    relaxed = relative_attribute_quadruplets(y, levels, 300, kind="relaxed", seed=shifted_seed(13, seed))
    return Instance("qwise_vector", "relattr-d8", X, strict + relaxed,
                    params={"diagonal": False, "C_Q": 1.0, "C_P": 1.0, "h": 0.05}, y=y,
                    description="linear model, d=8, 500 strict + 300 relaxed relative-attribute quadruplets")


# ----------------------------------------------------------------------------- taxonomy (thesis 2.5)
def hierarchy_instance(method: str, name: str, seed: int, params: dict) -> Instance:
    """Synthetic two-level taxonomy (3 super-classes x 3 sub-classes x 15 points, 4 informative +
    4 noise features, standardized), 300 same-vs-sibling and 300 sibling-vs-cousin quadruplets (k = 5).

    The sub-classes of a super-class overlap, so some quadruplets stay violated at every metric and
    the optimum is clearly positive (design §6). C_Q = 0.01 (the trace term weighs as much as the
    hinge losses): at C_Q = 1 the projected subgradient row needs > 20,000 iterations for a certified
    gap of 5e-4 (measured 3e-3..7e-3 there), at 0.01 it converges in 400-700 (0.1 s)."""
    from ..datasets import standardize
    from ..taxonomy import synthetic_taxonomy, taxonomy_quadruplets

    X, y, tree = synthetic_taxonomy(3, 3, 15, d_informative=4, d_noise=4, seed=shifted_seed(31, seed))
    X = standardize(X)
    cons = taxonomy_quadruplets(X, y, tree, n_same=300, n_sibling=300, n_neighbors=5, seed=shifted_seed(32, seed))
    return Instance(method, name, X, cons, params=params, y=y,
                    description=f"two-level taxonomy, d=8, {len(cons)} taxonomy quadruplets (thesis 2.5.1)",
                    extra={"tree": tree})


@register("qwise", "hierarchy-d8")
def _hierarchy_d8(seed: int = 0) -> Instance:
    return hierarchy_instance("qwise", "hierarchy-d8", seed,
                              {"regularizer": "trace", "C_Q": 0.01, "C_P": 1.0, "reg_weight": 1.0})


@register("qwise_vector", "hierarchy-diag-d8")
def _hierarchy_diag_d8(seed: int = 0) -> Instance:
    return hierarchy_instance("qwise_vector", "hierarchy-diag-d8", seed,
                              {"diagonal": True, "C_Q": 1.0, "C_P": 1.0, "h": 0.05})


# ----------------------------------------------------------------------------- webpage change detection
def webpage_monotony(seed: int):
    r"""Thesis ch. 4 on a simulated page (:mod:`cvxmetric.webpage`): 4 x 5 grid (8 menu, 3 ad, 9 content
    regions), 60 hourly versions of which the first 30 train; monotony sets A and B with change period
    change_period = 4 in the window t - r <= 2, s - t <= 3 (eqs. 4.1-4.2, 214 quadruplets).

    Returns ``(table, constraints, extra)``: the VersionPairs table of the training pairs, their
    monotony quadruplets, and the instances' ``extra``: ``history`` (all 60 versions, the ground
    truth), ``pairs`` (the table), ``n_train`` (30), ``change_period``.
    """
    from ..webpage import monotony_constraints, simulate_page

    n_versions, n_train, change_period, back, ahead = 60, 30, 4, 2, 3
    history = simulate_page(n_versions, seed=shifted_seed(60, seed))
    table = history.version_pairs([(r, s) for r in range(n_train) for s in range(r + 1, min(n_train, r + back + ahead + 1))])
    cons = monotony_constraints(table, change_period, max_back=back, max_ahead=ahead)
    return table, cons, {"history": history, "pairs": table, "n_train": n_train, "change_period": change_period}


@register("qwise_vector", "webpage-diag")
def _webpage_diag(seed: int = 0) -> Instance:
    """The simulated page (:func:`webpage_monotony`), vector model: diagonal w >= 0 on d_regions
    (eq. 4.5) on the monotony quadruplets plus 8 similar and 8 dissimilar successive pairs labelled
    by the simulator's ground truth (a story replaced or not) against the learned threshold b
    (eqs. 4.3-4.4; b is the vector model's bias)."""
    from ..webpage import successive_pairs, threshold_pairs

    table, cons, extra = webpage_monotony(seed)
    succ = successive_pairs(extra["n_train"])
    change = extra["history"].semantic_change(succ)
    rng = np.random.default_rng(shifted_seed(61, seed))
    sim = rng.permutation(succ[change == 0])[:8]
    dis = rng.permutation(succ[change > 0])[:8]
    pairs = threshold_pairs(table, similar=sim, dissimilar=dis)
    return Instance("qwise_vector", "webpage-diag", table.X, cons + pairs,
                    params={"diagonal": True, "C_Q": 1.0, "C_P": 1.0, "h": 0.05},
                    description=f"webpage, diagonal w on d_regions, d=20, {len(cons)} "
                                f"monotony quadruplets + {len(sim)} similar / {len(dis)} dissimilar pairs",
                    extra=extra)


@register("qwise", "webpage-full")
def _webpage_full(seed: int = 0) -> Instance:
    """The simulated page (:func:`webpage_monotony`), full M on c = sqrt(d_regions) (eq. 4.6), the
    monotony sets A and B only, trace regularizer, C_Q = 0.03. (At C_Q = 0.3-1 the problem is nearly
    separable with many tight constraints: the subgradient method needed > 20,000 iterations for a
    5e-4 certified gap on 2-4 of 5 seeds and PDHG's fast-point KKT residual reached 0.2-0.29.) The
    optimum is clearly positive (0.45-1.2 on seeds 0-4): every A term costs C_Q at the origin."""
    table, cons, extra = webpage_monotony(seed)
    return Instance("qwise", "webpage-full", table.X, cons,
                    params={"regularizer": "trace", "C_Q": 0.03, "C_P": 1.0, "reg_weight": 1.0},
                    description=f"webpage, full M on sqrt(d_regions), d=20, {len(cons)} monotony quadruplets",
                    extra=extra)
