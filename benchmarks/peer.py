"""Run the peer library metric-learn in its own virtual environment, from a benchmark process.

metric-learn 0.7.0 does not run with scikit-learn >= 1.6 (design §6), so it lives in a
separate venv and is called through a subprocess; data go through a temporary ``.npz`` file
and the fit time is measured inside the subprocess (import time excluded).

Set-up (once; not a project dependency)::

    python -m venv /work/peer-venv
    /work/peer-venv/bin/pip install "scikit-learn<1.6" "numpy<2.1" scipy metric-learn==0.7.0

and point ``CVXMETRIC_PEER_PYTHON`` at its interpreter if it lives elsewhere.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

PEER_PYTHON = os.environ.get("CVXMETRIC_PEER_PYTHON", "/work/peer-venv/bin/python")
#: The environment that pins a child process's BLAS (and OpenMP) to one thread, like our side of
#: every comparison (threadpoolctl cannot reach into another process).
BLAS_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

_SCRIPT = r"""
import json, sys, time
import numpy as np
import metric_learn
args = json.loads(sys.argv[1])
data = np.load(args["data"], allow_pickle=False)
cls = getattr(metric_learn, args["estimator"])
est = cls(**args["params"])
fit_args = [data[k] for k in args["fit_args"]]
t0 = time.perf_counter()
est.fit(*fit_args)
elapsed = time.perf_counter() - t0
out = {"M": est.get_mahalanobis_matrix()}
extra = {"time": elapsed, "n_iter": int(getattr(est, "n_iter_", -1) or -1)}
np.savez(args["out"], **out)
print(json.dumps(extra))
"""


def peer_available() -> bool:
    """Whether the peer interpreter exists and imports metric_learn."""
    if not Path(PEER_PYTHON).exists():
        return False
    r = subprocess.run([PEER_PYTHON, "-c", "import metric_learn"], capture_output=True)
    return r.returncode == 0


def run_peer(estimator: str, params: dict, **arrays) -> dict:
    """Fit ``metric_learn.<estimator>(**params)`` on ``arrays`` (passed to ``fit`` in order).

    Returns
    -------
    dict
        ``M`` (its Mahalanobis matrix), ``time`` (fit seconds), ``n_iter`` (-1 if unknown).
    """
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data.npz")
        out = os.path.join(tmp, "out.npz")
        np.savez(data, **{k: np.asarray(v) for k, v in arrays.items()})
        payload = json.dumps({"estimator": estimator, "params": params, "data": data, "out": out,
                              "fit_args": list(arrays)})
        r = subprocess.run([PEER_PYTHON, "-c", _SCRIPT, payload], capture_output=True, text=True,
                           env={**os.environ, **BLAS_ENV})
        if r.returncode != 0:
            raise RuntimeError(f"metric-learn {estimator} failed:\n{r.stderr[-2000:]}")
        extra = json.loads(r.stdout.strip().splitlines()[-1])
        with np.load(out) as f:
            extra["M"] = np.array(f["M"])
    return extra
