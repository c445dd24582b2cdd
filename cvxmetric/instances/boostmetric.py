"""Default BoostMetric instances: iris, wine and a concentric-circles toy, one per loss.

Triplets come from labels as in the paper (k = 3 targets and k = 3 impostors per point, so 9
per point; :func:`cvxmetric.generators.triplets_from_labels`). The data sets are subsampled
(seeded, stratified by nothing but the seed) to 60 points, about 540 triplets, so that Clarabel
solves each problem in seconds. Every optimum is clearly non-zero (design §6): the triplets are
not separable (hinge: the mean of the 10 % smallest margins; exp/logistic: a trace weight that
keeps tr X* moderate).
"""
from __future__ import annotations

import numpy as np

from ..datasets import load_dataset
from ..generators import triplets_from_labels
from . import Instance, register, shifted_seed

#: Default trace weight per smooth loss: nu = 0.01 keeps tr X* around 10 for the exponential loss
#: (a log-sum-exp, O(1) in m); the logistic loss is a sum of m terms, nu = 1 plays the same role.
DEFAULT_NU = {"exp": 0.01, "logistic": 1.0}

#: Per-data-set overrides, from the problem, not from any solver's status. The exponential-loss
#: problem (8) is bounded below iff nu >= lambda* = min over the simplex of lambda_max(sum_r u_r A_r)
#: (the best worst margin of a trace-one X; :func:`cvxmetric.solvers.boostmetric_lp.lambda_max_column_generation`
#: with cap 1), and its certificate needs the slack nu - lambda* (design §5.6). Measured lambda* on
#: the 60-point samples, seeds 0-4: iris -0.077 .. -0.013, circles -0.84 .. -0.59 (below 0: no
#: metric satisfies every triplet, any nu > 0 is fine) and wine 0.38 .. 0.95 (13 dimensions, 60
#: points: separable), so wine needs nu = 3 (>= 3 lambda*). The logistic loss is bounded for
#: every nu > 0 and keeps its default.
NU_OVERRIDES = {("wine", "exp"): 3.0}

#: Hinge: nu = 1 / K with K = HINGE_TAIL * m, i.e. maximise the mean of the 10 % smallest margins.
HINGE_TAIL = 0.1


def concentric_circles(n_per_class: int = 15, *, n_classes: int = 4, noise_dims: int = 8, noise: float = 1.0,
                       radius_noise: float = 0.05, seed=None) -> tuple[np.ndarray, np.ndarray]:
    """The toy of the paper's figure 1: classes on concentric circles (radii 1, 2, ...) in the first
    two coordinates, followed by ``noise_dims`` Gaussian noise coordinates of scale ``noise``.

    Returns
    -------
    X : ndarray, shape (n_classes * n_per_class, 2 + noise_dims)
    y : ndarray, shape (n_classes * n_per_class,)
    """
    rng = np.random.default_rng(seed)
    n = n_classes * n_per_class
    y = np.repeat(np.arange(n_classes), n_per_class)
    theta = rng.uniform(0, 2 * np.pi, n)
    r = (y + 1.0) + radius_noise * rng.standard_normal(n)
    X = np.column_stack([r * np.cos(theta), r * np.sin(theta), noise * rng.standard_normal((n, noise_dims))])
    return X, y


def boostmetric_instance(dataset: str, loss: str, *, n: int = 60, seed: int = 0, nu: float | None = None,
                         name: str | None = None) -> Instance:
    """A BoostMetric instance: ``n`` points of ``dataset`` ("iris", "wine" or "circles"), paper triplets.

    ``nu`` defaults to ``1 / (HINGE_TAIL * m)`` for the hinge loss and ``DEFAULT_NU[loss]`` otherwise.
    """
    if dataset == "circles":
        X, y = concentric_circles(max(4, n // 4), seed=seed)
    else:
        X, y = load_dataset(dataset)
        if n < X.shape[0]:
            idx = np.sort(np.random.default_rng(seed).choice(X.shape[0], n, replace=False))
            X, y = X[idx], y[idx]
    trip = triplets_from_labels(X, y, n_neighbors=3, n_impostors=3)
    m = len(trip)
    if nu is None:
        nu = 1.0 / max(1, int(round(HINGE_TAIL * m))) if loss == "hinge" else NU_OVERRIDES.get((dataset, loss), DEFAULT_NU[loss])
    return Instance("boostmetric", name or f"{dataset}-{loss}", X, trip, params={"loss": loss, "nu": float(nu)}, y=y,
                    description=f"{dataset}, {X.shape[0]} points, {m} triplets (k = 3 + 3), {loss} loss, nu = {nu:.3g}",
                    extra={"seed": seed})


def _make(dataset: str, loss: str):
    @register("boostmetric", f"{dataset}-{loss}")
    def factory(seed: int = 0) -> Instance:
        return boostmetric_instance(dataset, loss, seed=shifted_seed(0, seed))
    return factory


for _ds in ("iris", "wine", "circles"):
    for _loss in ("hinge", "exp", "logistic"):
        _make(_ds, _loss)


#: Large-d instances (not in the default report): a data set embedded in d dimensions by a
#: random orthonormal map plus isotropic noise of this size relative to the data's RMS.
#: The triplets are those of the original features; the noise keeps every difference vector
#: full-dimensional while the optimum stays on the informative directions (low rank), as in
#: high-dimensional data of low intrinsic dimension. Clarabel's SDP has d(d+1)/2 = 20,100
#: variables at d = 200 (benchmarks/boostmetric_cg.py: it does not finish in 10 minutes).
EMBEDDING_NOISE = 0.01


def embedded_instance(dataset: str, d: int, *, n: int = 178, seed: int = 0, noise: float = EMBEDDING_NOISE,
                      name: str | None = None) -> Instance:
    """A hinge :func:`boostmetric_instance` of ``dataset`` with its points embedded in ``d`` dimensions.

    ``X = X0 Q^T + noise * rms(X0) * G`` with ``X0`` the centred features (n, d0), ``Q`` a random
    orthonormal (d, d0) matrix and ``G`` standard Gaussian (n, d), both from ``seed``.
    """
    base = boostmetric_instance(dataset, "hinge", n=n, seed=seed)
    X0 = base.X - base.X.mean(axis=0)
    if d < X0.shape[1]:
        raise ValueError(f"d = {d} is below the data's dimension {X0.shape[1]}; embed into d >= {X0.shape[1]}")
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((d, X0.shape[1])))
    X = X0 @ Q.T + noise * float(np.sqrt(np.mean(X0 ** 2))) * rng.standard_normal((X0.shape[0], d))
    m = len(base.constraints)
    return Instance("boostmetric", name or f"{dataset}-hinge-d{d}", X, base.constraints, params=dict(base.params),
                    y=base.y, description=f"{dataset}, {X.shape[0]} points embedded in d = {d} (noise {noise:g} "
                                          f"x RMS), {m} triplets (k = 3 + 3), hinge loss, nu = {base.params['nu']:.3g}",
                    extra={"seed": seed})


def _make_embedded(dataset: str, d: int):
    @register("boostmetric", f"{dataset}-hinge-d{d}", default=False)
    def factory(seed: int = 0) -> Instance:
        return embedded_instance(dataset, d, seed=shifted_seed(0, seed))
    return factory


for _d in (200, 500):
    _make_embedded("wine", _d)
