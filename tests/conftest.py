"""Shared test settings: deterministic hypothesis profile, a non-interactive matplotlib backend."""
import os

import matplotlib
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")

settings.register_profile("cvxmetric", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("cvxmetric")
