"""Shared test settings: deterministic hypothesis profile, a non-interactive matplotlib backend,
single-threaded BLAS (the test problems are small; multi-threaded BLAS only spins on 2 cores)."""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # inherited by the notebook kernels
os.environ.setdefault("OMP_NUM_THREADS", "1")

from threadpoolctl import threadpool_limits  # noqa: E402

threadpool_limits(limits=1, user_api="blas")

import matplotlib  # noqa: E402
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")

settings.register_profile("cvxmetric", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("cvxmetric")
