"""Default ORML instances: simulated collaborative-retrieval log sessions (Liu, Hoi & Liu 2008).

Each instance holds the data ``X``, its labels ``y`` (used only to simulate the users' relevance
judgements) and, in ``extra``, the judgements ``pairs``, ``relevant``, ``session`` of
:func:`cvxmetric.orml.simulate_log_sessions`; ``params`` are the model's ``n_neighbors,
alpha, beta, output_weight, r`` (the paper's k = 6, alpha = 1, beta = 2, gamma = 9; r smaller than
its 15 to keep the rows small).
"""
from __future__ import annotations

import numpy as np

from ..datasets import load_dataset
from ..orml import simulate_log_sessions
from . import Instance, register, shifted_seed

PAPER_PARAMS = {"n_neighbors": 6, "alpha": 1.0, "beta": 2.0, "output_weight": 9.0}


def orml_instance(name, X, y, *, n_sessions, n_judged, noise, r, seed, description) -> Instance:
    pairs, relevant, session = simulate_log_sessions(X, y, n_sessions, n_judged, noise=noise, seed=seed)
    return Instance("orml", name, X, None, params=dict(PAPER_PARAMS, r=r), y=y, description=description,
                    extra={"pairs": pairs, "relevant": relevant, "session": session})


@register("orml", "syn-sessions")
def _synthetic(seed: int = 0) -> Instance:
    """Three Gaussian classes in d = 10, 10 sessions of 6 judged images, 10 % judgement noise."""
    rng = np.random.default_rng(shifted_seed(61, seed))
    d = 10
    y = np.repeat(np.arange(3), 40)
    X = 1.5 * rng.standard_normal((3, d))[y] + rng.standard_normal((len(y), d)) * np.linspace(0.5, 2.0, d)
    return orml_instance("syn-sessions", X, y, n_sessions=10, n_judged=6, noise=0.1, r=5,
                         seed=shifted_seed(62, seed),
                         description="3 Gaussian classes, d=10, 10 sessions x 6 judged (10% noise), r=5")


@register("orml", "digits-sessions")
def _digits(seed: int = 0) -> Instance:
    """200 digits (pixels in [0, 1], d = 64), 12 sessions of 8 judged images, r = 10."""
    X, y = load_dataset("digits")
    rng = np.random.default_rng(shifted_seed(63, seed))
    idx = np.sort(rng.choice(len(X), size=200, replace=False))
    return orml_instance("digits-sessions", X[idx], y[idx], n_sessions=12, n_judged=8, noise=0.05, r=10,
                         seed=shifted_seed(64, seed),
                         description="200 digits, d=64, 12 sessions x 8 judged (5% noise), r=10")
