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
