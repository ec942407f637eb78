"""A comparison's picture (portcheck.plot): written, the first diverging module marked on a planted bug (in the
cumulative and the isolated panel), nothing marked on a clean port, one line without matplotlib, and the hand-in's
diagnostics/ holding it."""
import importlib.util
import sys

import numpy as np
import pytest

from bert_sst2 import paths
from portcheck import compare_backward, compare_forward, convert
from portcheck.forward import plot

PNG = b"\x89PNG\r\n\x1a\n"
X = np.random.RandomState(0).randn(2, 3, 16, 16).astype("float32")


def planted_tool():
    spec = importlib.util.spec_from_file_location("plot_planted", paths.ROOT / "tools" / "plot_planted.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def converted(planted_block):
    t, p = planted_tool().models(planted_block)
    convert(t, p, inputs=X)
    return t, p


@pytest.mark.parametrize("planted", [True, False])
def test_the_forward_picture_marks_the_first_diverging_module(tmp_path, planted):
    t, p = converted(1 if planted else None)
    report = compare_forward(t.eval(), p.eval(), X, isolate=True)
    panels = plot.forward_panels(report)
    assert [q.title.split(":")[0] for q in panels] == ["cumulative", "isolated"]  # side by side
    marked = [q.marked for q in panels]
    assert marked == (["block1_bn", "block1_bn"] if planted else [None, None]), marked
    assert all(len(q.names) == len(q.ratios) > 10 for q in panels)
    assert report.plot(tmp_path / "forward.png").startswith("plot:")
    assert (tmp_path / "forward.png").read_bytes()[:8] == PNG


def test_the_backward_picture_marks_the_gradient_where_the_runs_part(tmp_path):
    import paddle
    import torch
    t, p = converted(1)
    report = compare_backward(t.train(), p.train(), X, np.array([0, 2]),
                              loss=(torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy),
                              optimizer=(lambda ps: torch.optim.SGD(ps, lr=0.1),
                                         lambda ps: paddle.optimizer.SGD(learning_rate=0.1, parameters=ps)), steps=2)
    frame = report.frame()  # the same figures for a notebook: every forward module, gradient and step's value
    assert list(frame["part"].unique()) == ["forward", "gradient", "step"] and sorted(frame["step"].dropna().unique()) == [1, 2]
    grad_rows = frame[frame["part"] == "gradient"]
    assert list(grad_rows["name"]) == [r.name for r in report.grads]
    assert list(grad_rows[grad_rows["first diverging"]]["name"]) == [report.first_diverging_gradient]
    assert (grad_rows["verdict"] == "RED").tolist() == [not r.passed for r in report.grads]
    panels = plot.backward_panels(report)
    grads = next(q for q in panels if q.title.startswith("gradients"))
    assert grads.marked == report.first_diverging_gradient and grads.marked is not None
    assert panels[-1].title.startswith("after step 2")
    assert report.plot(tmp_path / "backward.png").startswith("plot:")
    assert (tmp_path / "backward.png").read_bytes()[:8] == PNG


def test_without_matplotlib_the_picture_is_one_line(tmp_path, monkeypatch):
    t, p = converted(None)
    report = compare_forward(t.eval(), p.eval(), X)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert report.plot(tmp_path / "forward.png") == plot.MISSING
    assert not (tmp_path / "forward.png").exists()


def test_the_hand_in_holds_the_picture(tmp_path):
    from portcheck import record_forward
    from portcheck.core import record
    from portcheck.pipeline.handin import hand_in, judge_and_log, model_output, save_side
    t, p = converted(None)
    t.eval(), p.eval()
    report = compare_forward(t, p, X, isolate=True)
    for side, model in (("torch", t), ("paddle", p)):
        rec = record_forward(model, X)
        exact = {"logits": model_output(rec, exact=True)} if side == "torch" else None
        save_side(tmp_path, "forward", side, {"logits": model_output(rec)}, {"inputs": record.fingerprint([("x", X)])},
                  f"{side}.py", exact=exact)
    assert judge_and_log(tmp_path, "forward").passed
    said = hand_in(tmp_path, "forward", tmp_path / "log_reprod", comparison=report)
    assert said == f"plot: {tmp_path / 'log_reprod' / 'diagnostics' / 'forward_modules.png'}"  # the copy handed in
    assert (tmp_path / "log_reprod" / "diagnostics" / "forward_modules.png").read_bytes()[:8] == PNG


def test_the_docs_picture_is_the_tools(tmp_path):
    """docs/img/planted_forward.png is what tools/plot_planted.py draws: re-drawn here, the same picture (its PNG
    header: width, height, depth; the pixels may differ by a rounding on another CPU)."""
    planted_tool()  # importable without running
    import subprocess
    out = tmp_path / "planted.png"
    proc = subprocess.run([sys.executable, str(paths.ROOT / "tools" / "plot_planted.py"), "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "first diverging: block1_bn" in proc.stdout, proc.stdout + proc.stderr
    assert out.read_bytes()[:26] == (paths.ROOT / "docs" / "img" / "planted_forward.png").read_bytes()[:26]


def test_the_forward_frame_holds_the_tables_figures_and_words():
    """report.frame(): a row per paired module and per module on torch's own values, each with torch's own error,
    the allowance, the ratios and its word; the planted module marked where the runs part."""
    t, p = converted(1)
    report = compare_forward(t.eval(), p.eval(), X, isolate=True)
    frame = report.frame()
    from portcheck.core.report import COLUMNS
    assert tuple(frame.columns) == COLUMNS and len(frame) == len(report.paired) + len(report.isolated)
    rows = frame[frame["part"] == "forward"]
    assert list(rows[rows["first diverging"]]["name"]) == [report.first_diverging] == ["block1_bn"]
    for r, (_, row) in zip(report.paired, rows.iterrows()):
        assert (row["name"], row["max diff"], row["torch fp32 err"], row["allowed"]) == (r.name, r.max, r.err32, r.allowed)
        assert row["of allowed"] == pytest.approx(r.max / r.allowed) and row["diff/err"] == pytest.approx(r.ratio)
        assert row["verdict"] == ("green" if r.passed else "RED")
    isolated = frame[frame["part"] == "forward, isolated"]
    assert "block1_bn" in set(isolated[isolated["verdict"] == "RED"]["name"])
    # docs/own_model.md's frame block is a whole program of its own, run with the page's (tests/test_five_steps.py)

def test_without_pandas_a_frame_is_one_line(monkeypatch):
    from portcheck.core.errors import PipelineError
    t, p = converted(None)
    report = compare_forward(t.eval(), p.eval(), X)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(PipelineError, match="pip install pandas"):
        report.frame()

