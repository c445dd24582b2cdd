"""Default Fantope instances: the thesis' synthetic set-up (sec. 3.4.1) at test sizes.

Points are :math:`U[0, 1)^d`, quadruplets are labelled by a rank-e target metric T and 10 % of them
are reversed (label noise, so the optimum is clearly positive, design §6). The parameters are
``rank`` (= e: the model penalises the ``k = d - e`` smallest eigenvalues), ``reg_weight`` (the
weight mu of the Fantope regularizer) and ``trace_weight`` (gamma, of the trace). ``extra["W"]`` is
a fixed Fantope point (the projector W(B) of a seeded random PSD B) at which the convex bound is
verified; ``extra["T"]`` is the target.
Default sizes keep every cvxpy solve well under a second (d <= 10, 300 constraints).
"""
from __future__ import annotations

from ..datasets import synthetic_low_rank_metric
from ..fantope import fantope_projector
from ..generators import quadruplets_from_metric
from ..linalg import random_psd
from . import Instance, register, shifted_seed


def synthetic_fantope(d: int, e: int, n: int, m: int, *, seed: int, reg_weight: float, trace_weight: float,
                      flip: float = 0.1, name: str | None = None, C_Q: float = 1.0) -> Instance:
    """A thesis 3.4.1-style Fantope instance (see the module docstring)."""
    X, T = synthetic_low_rank_metric(n, d, e, seed=seed)
    cons = quadruplets_from_metric(X, T, m, seed=seed + 1, flip_fraction=flip)
    W = fantope_projector(random_psd(d, seed=seed + 2), d - e)
    return Instance("fantope", name or f"syn-d{d}-e{e}", X, cons,
                    params={"rank": e, "reg_weight": reg_weight, "trace_weight": trace_weight,
                            "C_Q": C_Q, "C_P": 1.0},
                    description=(f"synthetic rank-{e} target, d={d}, {len(cons)} quadruplets, {flip:.0%} "
                                 f"flipped, rank={e}, reg_weight={reg_weight}, trace_weight={trace_weight}"),
                    extra={"T": T, "W": W, "e": e})


@register("fantope", "syn-d8-e2")
def _syn_d8(seed: int = 0) -> Instance:
    return synthetic_fantope(8, 2, 100, 300, seed=shifted_seed(80, seed), reg_weight=2.0, trace_weight=0.1, name="syn-d8-e2")


@register("fantope", "syn-d10-e3")
def _syn_d10(seed: int = 0) -> Instance:
    return synthetic_fantope(10, 3, 150, 300, seed=shifted_seed(100, seed), reg_weight=1.0, trace_weight=0.1, C_Q=0.3, name="syn-d10-e3")


@register("fantope", "syn-d16-e4", default=False)
def _syn_d16(seed: int = 0) -> Instance:
    """Larger (~10-20 s of fast solves per row); the subgradient engine needs ~2e4 iterations."""
    return synthetic_fantope(16, 4, 300, 600, seed=shifted_seed(160, seed), reg_weight=2.0, trace_weight=0.0, name="syn-d16-e4")


@register("fantope", "syn-d50-e10-m1000", default=False)
def _syn_d50(seed: int = 0) -> Instance:
    return synthetic_fantope(50, 10, 2000, 1000, seed=shifted_seed(500, seed), reg_weight=2.0, trace_weight=0.1, name="syn-d50-e10-m1000")
