"""portcheck/diff.py, portcheck/report.py, portcheck/fileio.py: every failure reprod_log lets through is a failure here."""
import json
import pickle

import numpy as np
import pytest

from portcheck.core import diff, fileio, report
from portcheck.core.errors import PipelineError
from portcheck.core.tolerances import Tol

A = {"logits": np.array([[0.1, 0.2], [0.3, 0.4]], dtype="float32")}


def results(a, b, **kw):
    return {r.key: r for r in diff.compare(a, b, **kw).keys}


def test_equal_passes():
    r = results(A, {"logits": A["logits"].copy()})["logits"]
    assert r.passed and r.max == 0 and r.mean == 0


def test_small_diff_passes_large_fails_and_both_are_reported():
    b = {"logits": A["logits"] + np.float32(1e-3)}
    r = results(A, b)["logits"]
    assert not r.passed and r.max == pytest.approx(1e-3, rel=1e-3) and r.mean == pytest.approx(1e-3, rel=1e-3)
    assert results(A, b, default=1e-2)["logits"].passed


@pytest.mark.parametrize("b, problem", [
    ({}, "missing in paddle"),
    ({"logits": A["logits"], "extra": np.zeros(1, "float32")}, "missing in torch"),
    ({"logits": A["logits"].T.copy()[:, :1]}, "shape"),
    ({"logits": A["logits"].astype("float64")}, "dtype"),
    ({"logits": np.array([[0.1, np.nan], [0.3, 0.4]], "float32")}, "NaN"),
    ({"logits": np.array([[0.1, np.inf], [0.3, 0.4]], "float32")}, "Inf"),
])
def test_each_mismatch_fails(b, problem):
    rs = diff.compare(A, b).keys
    assert not all(r.passed for r in rs)
    assert any(problem in p for r in rs for p in r.problems)


def test_no_silent_broadcast_or_transpose():
    row = {"x": np.ones((1, 3), "float32")}
    assert not results(row, {"x": np.ones((3, 1), "float32")})["x"].passed  # reprod_log transposes this
    assert not results(row, {"x": np.ones((3,), "float32")})["x"].passed    # numpy would broadcast this
    scalar = {"x": np.float32(1).reshape(())}
    assert results(scalar, {"x": np.ones((1,), "float32")})["x"].passed  # 0-d and [1]: the same scalar
    assert not results(scalar, {"x": np.ones((1, 1), "float32")})["x"].passed
    assert not results({"x": np.ones((2,), "float32")}, {"x": np.ones((2, 1), "float32")})["x"].passed


def test_nan_on_both_sides_fails():
    nan = {"x": np.array([np.nan], "float32")}
    assert not results(nan, {"x": nan["x"].copy()})["x"].passed


def test_per_key_thresholds_first_match_wins():
    a = {"loss": np.zeros(1, "float32"), "grad_w": np.zeros(1, "float32")}
    b = {"loss": np.full(1, 5e-6, "float32"), "grad_w": np.full(1, 5e-6, "float32")}
    rs = results(a, b, tolerances={"grad_*": 1e-5, "*": 1e-6})
    assert rs["grad_w"].passed and not rs["loss"].passed


def test_save_load_round_trip(tmp_path):
    fileio.save_npy(tmp_path / "x.npy", A)
    back = fileio.load_npy(tmp_path / "x.npy")
    assert back.keys() == A.keys() and np.array_equal(back["logits"], A["logits"])
    # the file is what reprod_log itself reads
    assert np.load(tmp_path / "x.npy", allow_pickle=True).item().keys() == A.keys()


class Boom:
    def __reduce__(self):
        import os
        return (os.system, ("touch PWNED",))


def test_load_refuses_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "evil.npy", np.array({"logits": Boom()}, dtype=object), allow_pickle=True)
    with pytest.raises(PipelineError, match="refusing to unpickle"):
        fileio.load_npy(tmp_path / "evil.npy")
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("payload, match", [
    (np.zeros(3, "float32"), "bare float32 array"),
    (np.array(["a", "b"], dtype=object), "not a dict"),
    (np.array({"k": "text"}, dtype=object), "not numeric numpy arrays"),
    (np.array({"k": np.array([1, None], dtype=object)}, dtype=object), "numeric arrays"),
])
def test_load_refuses_non_arrays(tmp_path, payload, match):
    np.save(tmp_path / "x.npy", payload, allow_pickle=True)
    with pytest.raises(PipelineError, match=match):
        fileio.load_npy(tmp_path / "x.npy")


def test_load_refuses_corrupt_file(tmp_path):
    fileio.save_npy(tmp_path / "x.npy", A)
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "x.npy").write_bytes(data[: len(data) // 2])
    with pytest.raises(PipelineError, match="re-run the script"):
        fileio.load_npy(tmp_path / "x.npy")


def test_pickled_dict_without_numpy_header_is_refused(tmp_path):
    (tmp_path / "x.npy").write_bytes(pickle.dumps({"logits": A["logits"]}))
    with pytest.raises(PipelineError):
        fileio.load_npy(tmp_path / "x.npy")


def check(a, b, log, name="pair"):
    result = diff.compare(fileio.load_npy(a), fileio.load_npy(b), name=name)
    report.write(result, log)
    return result


def test_report_writes_log_and_verdict_without_duplicates(tmp_path):
    fileio.save_npy(tmp_path / "t.npy", A)
    fileio.save_npy(tmp_path / "p.npy", {"logits": A["logits"] + np.float32(1)})
    for _ in range(2):  # two checks in one process: reprod_log's logger would double every line
        assert check(tmp_path / "t.npy", tmp_path / "t.npy", tmp_path / "ok_diff.log").passed
        assert not check(tmp_path / "t.npy", tmp_path / "p.npy", tmp_path / "bad_diff.log").passed
    ok = (tmp_path / "ok_diff.log").read_text().splitlines()
    assert len(ok) == len(set(line.split("] ", 1)[1] for line in ok)) == 4
    assert ok[-1].endswith("diff check passed")
    assert (tmp_path / "bad_diff.log").read_text().splitlines()[-1].endswith("diff check failed: logits")
    verdict = json.loads((tmp_path / "bad_diff.json").read_text())
    assert verdict["passed"] is False and verdict["keys"][0]["key"] == "logits"
    assert verdict["keys"][0]["max"] == pytest.approx(1.0) and verdict["keys"][0]["allowed"] == 1e-6
    assert json.loads((tmp_path / "ok_diff.json").read_text())["passed"] is True


def test_result_is_data_findings_count(tmp_path):
    result = diff.compare(A, {"logits": A["logits"].copy()}, name="x")
    assert result.passed
    result.findings.append(diff.Finding("module outputs", False, "first diverging module: m"))
    assert not result.passed
    lines = [m for m, _ in report.log_lines(result)]
    assert lines[-2:] == ["module outputs: FAILED, first diverging module: m", "diff check failed: module outputs"]


def test_missing_file_names_the_command(tmp_path):
    fileio.save_npy(tmp_path / "t.npy", A)
    with pytest.raises(PipelineError, match="run `python make_paddle.py` first"):
        diff.load_pair(tmp_path / "t.npy", tmp_path / "p.npy", how={"torch": "x", "paddle": "python make_paddle.py"})


def test_reprod_log_demo_shows_one_pass_one_fail(tmp_path):
    from conftest import run
    run("pipeline/reprod_log_demo/write_log.py", home=tmp_path, check=0)
    proc = run("pipeline/reprod_log_demo/check_log_diff.py", home=tmp_path, check=1)
    assert "diff check failed: misaligned" in proc.stdout
    log = (tmp_path / "pipeline/reprod_log_demo/demo_diff.log").read_text()
    assert "aligned: \n" in log.replace("] root INFO: ", "\n") and "max diff: check passed: True" in log
    assert not (tmp_path / "log_reprod").exists()


def test_relative_tolerance_scales_with_the_values():
    """The same relative rounding passes at any magnitude; the same absolute diff fails on small values."""
    tol = Tol(atol=1e-9, rtol=1e-5, mean=None)
    for size in (1e-2, 1.0, 1e2):
        a = {"x": np.full(4, size, "float64")}
        assert results(a, {"x": a["x"] * (1 + 5e-6)}, default=tol)["x"].passed
        assert not results(a, {"x": a["x"] * (1 + 5e-5)}, default=tol)["x"].passed
    r = results({"x": np.array([0.1, -0.1])}, {"x": np.array([0.1 + 2e-6, -0.1])}, default=tol)["x"]
    assert not r.passed and r.scale == 0.1 and r.allowed == pytest.approx(1e-9 + 1e-6)


def test_mean_bound_is_a_second_condition():
    """A loose rule never loosens the guide's mean bound: a loss off by 1e-5 stays red."""
    a = {"loss": np.array([0.7], "float32")}
    r = results(a, {"loss": a["loss"] + np.float32(1e-5)}, default=Tol(atol=1e-3, rtol=0.0))["loss"]
    assert r.max_ok and not r.mean_ok and not r.passed
    assert any("the guide's bound 1e-06" in p for p in r.failures)
    lines = [m for m, _ in report.log_lines(diff.CheckResult("x", [r]))]
    assert lines[1].startswith("\tmean diff: check passed: False, value: ") and "threshold: 1e-06" in lines[1]
    assert lines[2].startswith("\tmax diff: check passed: True, value: ")
