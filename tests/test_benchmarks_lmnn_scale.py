"""The LMNN scale benchmark: its own rows run and certify; pylmnn's run-time patch."""
import pytest

from benchmarks import lmnn_scale


def test_ours_only_row_is_certified(capsys):
    assert lmnn_scale.main(["--sizes", "200", "--d", "10", "--peers", "none"]) == 0
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.strip().startswith("200")]
    assert len(row) == 1 and "*" not in row[0], out   # certified within tol


def test_a_failing_size_is_a_row_with_its_reason(capsys, monkeypatch):
    def refuse(X, y, tol):
        raise RuntimeError("the working set would grow too large")
    monkeypatch.setattr(lmnn_scale, "run_ours", refuse)
    assert lmnn_scale.main(["--sizes", "100", "--d", "10", "--peers", "none"]) == 0
    assert "failed: the working set would grow too large" in capsys.readouterr().out


def test_pylmnn_patch_applies_once_and_refuses_another_release(tmp_path):
    (tmp_path / "__init__.py").write_text("from .lmnn import LargeMarginNearestNeighbor\n"
                                          "from .bayesopt import find_hyperparams\n")
    (tmp_path / "lmnn.py").write_text("params = {'x0': transformation,\n 'tol': 1}\n")
    lmnn_scale.patch_pylmnn_files(tmp_path)
    assert "bayesopt" not in (tmp_path / "__init__.py").read_text()
    assert "'x0': transformation.ravel()," in (tmp_path / "lmnn.py").read_text()
    lmnn_scale.patch_pylmnn_files(tmp_path)   # patched already: unchanged
    assert (tmp_path / "lmnn.py").read_text().count("ravel") == 1
    (tmp_path / "lmnn.py").write_text("params = {'x0': w0}\n")
    with pytest.raises(RuntimeError, match="pylmnn release"):
        lmnn_scale.patch_pylmnn_files(tmp_path)


def test_a_peer_over_the_memory_limit_is_skipped_with_its_reason(capsys, monkeypatch):
    """metric-learn's class-by-class distance block: 10 bytes an entry of the largest class times the
    points of the classes above it (9.0 GB at 100,000 points in 10 classes); pylmnn is not skipped."""
    import numpy as np
    y = np.repeat(np.arange(10), 10_000)
    assert lmnn_scale.peer_memory_gb("metric-learn", y) == pytest.approx(9.0)
    assert lmnn_scale.peer_skip_reason("metric-learn", y, 4.0) == "skipped: 9.0 GB > 4"
    assert lmnn_scale.peer_skip_reason("metric-learn", y[::5], 4.0) is None    # 20,000 points: 0.36 GB
    assert lmnn_scale.peer_skip_reason("pylmnn", y, 4.0) is None
    monkeypatch.setattr(lmnn_scale, "ensure_venv", lambda venv: venv)
    ran = []
    monkeypatch.setattr(lmnn_scale, "run_peer", lambda *a: ran.append(a) or {"error": "not run here"})
    assert lmnn_scale.main(["--sizes", "200", "--d", "10", "--peers", "metric-learn", "--peer-gb", "1e-6"]) == 0
    out = capsys.readouterr().out
    assert not ran and "skipped: 0.0 GB > 1e-06" in out, out   # 3.6e-05 GB


def test_estimator_rows_take_the_scalable_engine_and_certify(capsys, monkeypatch):
    """The estimator benchmark's rows (coarse start lowered to their size): the PDHG engine from the
    coarse start, certified within tol (no '*')."""
    from benchmarks import lmnn_estimator
    from cvxmetric.solvers import lmnn as lmnn_solvers
    monkeypatch.setattr(lmnn_solvers, "COARSE_MIN_POINTS", 100)
    monkeypatch.setattr(lmnn_estimator, "fit_in_own_process", lmnn_estimator.fit_row)
    assert lmnn_estimator.main(["--points", "300"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "300 x" in line]
    assert len(rows) == len(lmnn_estimator.ROWS)
    for row in rows:
        assert "lmnn-pdhg" in row and "coarse_start" in row and "*" not in row, row
