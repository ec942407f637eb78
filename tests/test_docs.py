"""The READMEs: README_cn.md says what README.md says (same commands), and the figures they report
are the committed hand-in's figures."""
import re
import textwrap

import numpy as np
import pytest

from bert_sst2 import paths
from portcheck.fileio import load_npy

README, README_CN = paths.ROOT / "README.md", paths.ROOT / "README_cn.md"
HAND_IN = paths.ROOT / "log_reprod"
FENCE = re.compile(r"^( *)```[^\n]*\n(.*?)^\1```", re.M | re.S)


def fenced(path):
    return [m.group(2) for m in FENCE.finditer(path.read_text(encoding="utf-8"))]


def test_chinese_readme_has_the_same_commands():
    blocks = fenced(README)
    assert blocks and fenced(README_CN) == blocks
    assert "README_cn.md" in README.read_text().splitlines()[0]
    assert "README.md" in README_CN.read_text(encoding="utf-8").splitlines()[0]


def test_the_own_model_block_is_the_quickstart_that_ci_runs():
    """README's "Your own model" block is examples/quickstart.py from its README marker on, which .ci/run runs
    in a venv holding only numpy, torch, paddlepaddle and the library."""
    script = (paths.ROOT / "examples" / "quickstart.py").read_text()
    block = script[script.index("# --- the README block\n") + len("# --- the README block\n"):]
    block = block[:block.index("raise SystemExit")]
    assert block in fenced(README), "README.md's own-model block is not examples/quickstart.py's"
    ci = (paths.ROOT / ".ci" / "run").read_text()
    assert "pip install ./lib" in ci and "examples/quickstart.py" in ci and "pip install ./lib" in README.read_text()


def test_the_own_model_steps_2_and_5_block_is_what_test_five_steps_runs():
    """README's "Your own model" block for Steps 2 and 5 is tests/test_five_steps.py's pieces marked `# --- README:
    Steps 2 and 5` (to `# --- end`), dedented and in order, one blank line apart: that file runs them on both
    sides of its own pair through all five steps."""
    text = (paths.ROOT / "tests" / "test_five_steps.py").read_text()
    pieces = [textwrap.dedent(p) for p in re.findall(r"^ *# --- README: Steps 2 and 5\n(.*?)^ *# --- end\n", text,
                                                     re.M | re.S)]
    assert len(pieces) == 4 and "data.record_batches(" in pieces[1] and "log.step(" in pieces[2], pieces
    assert "\n".join(pieces) in fenced(README), "README.md's Steps 2 and 5 block is not tests/test_five_steps.py's"


def test_no_machine_paths_in_committed_text():
    committed = [paths.ROOT / "docs", paths.ROOT / "examples", HAND_IN]
    for path in [README, README_CN, *(f for folder in committed for pattern in ("*.md", "*.log", "*.json")
                                      for f in folder.rglob(pattern))]:
        text = path.read_text(encoding="utf-8", errors="replace")
        for marker in ("/work/", "/root/", "/home/", "/tmp/", "site-packages"):
            assert marker not in text, f"{path.name} names a machine path ({marker})"


@pytest.mark.skipif(not (HAND_IN / "train_align_torch.npy").is_file(), reason="no committed hand-in")
def test_reported_figures_are_the_hand_ins():
    text, text_cn = README.read_text(), README_CN.read_text(encoding="utf-8")
    summary = (HAND_IN / "SUMMARY.md").read_text()
    acc = {fw: float(load_npy(HAND_IN / f"train_align_{fw}.npy")["acc"]) for fw in ("torch", "paddle")}
    metric = load_npy(HAND_IN / "metric_torch.npy")
    figures = [f"{acc['torch']:.5f}", f"{acc['paddle']:.5f}", f"{float(metric['model_accuracy']):.4f}",
               f"{len(load_npy(HAND_IN / 'train_align_torch.npy')['lr']):,}"]
    # the training times: each framework's own clock (train_curves) and the whole run's (SUMMARY.md)
    for fw in ("torch", "paddle"):
        curves = load_npy(HAND_IN / "diagnostics" / f"train_curves_{fw}.npy")
        figures.append(f"{float(curves['train_seconds']) / 60:.1f}")
    figures.append(re.search(r", ([0-9.]+) min\.", summary).group(1))
    for figure in figures:
        assert figure in text and figure in text_cn, figure
    for figure in figures[:2]:
        assert figure in summary, figure
    assert np.asarray(metric["model_logits"]).shape[0] == 872  # the metric pair is on the real dev set


def test_align_figures_are_the_benchmarks():
    """The "Your own model" figures are docs/align.md's, which tools/bench_align.py wrote."""
    bench = (paths.ROOT / "docs" / "align.md").read_text()
    resnet = re.search(r"^\| transformers ResNet-18[^|]*\| green \| ([\d.]+) \|[^|]*\| RED \|[^|]*\| ([\d.e+]+) \| (\d+) \|$",
                       bench, re.M)
    clean_all = max(re.findall(r"^\|[^|]*\| green \| ([\d.]+) \|[^|]*\| RED \|", bench, re.M), key=float)
    train = re.search(r"^\| clean port \| green \| - \| ([\d.]+) \|$", bench, re.M).group(1)
    cost = re.search(r": ([\d.]+)x \(target", bench).group(1)
    for text in (README.read_text(), README_CN.read_text(encoding="utf-8")):
        flat = " ".join(text.split())
        for figure in (*resnet.groups(), clean_all, train, cost):
            assert re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d])", flat), figure


def test_llm_figures_are_the_benchmarks():
    """The large-model figures of the READMEs (both) and lib/README are docs/llm.json's, which
    tools/bench_llm.py wrote, at the 1.1B width."""
    import json
    llm = json.loads((paths.ROOT / "docs" / "llm.json").read_text())["2048"]
    w = llm["weights_gb"]
    figures = [f"{w:.2f}", *(f"{llm[p]['peak_gb']:.2f}" for p in ("convert", "compare", "isolated")),
               f"{llm['isolated']['peak_gb'] / w:.2f}x"]
    plain = llm["forward"]["torch_seconds"] + llm["forward"]["paddle_seconds"]
    figures += [f"{llm['compare']['seconds'] / plain:.1f}x", f"{llm['isolated']['seconds'] / plain:.1f}x"]
    runs = llm["runs"]  # the repeated runs on the code measured: the isolated ratio's spread, and how often it met 4x
    figures += [f"{min(r['isolated_ratio'] for r in runs):.2f}", f"{max(r['isolated_ratio'] for r in runs):.2f}"]
    met = sum(r["isolated_ratio"] <= 4 for r in runs)
    said = {README_CN: f"{len(runs)} 次中有 {met} 次"}
    for path in (README, README_CN, paths.ROOT / "lib" / "README.md"):
        flat = " ".join(path.read_text(encoding="utf-8").split())
        for figure in figures + [said.get(path, f"{met} of {len(runs)}")]:
            assert figure.rstrip("x") in flat, (path.name, figure)


def test_isolate_figures_are_the_benchmarks():
    """The isolated-judgement figures of the READMEs (both) are docs/isolate.json's, which tools/bench_isolate.py
    wrote with docs/isolate.md."""
    import json
    bench = json.loads((paths.ROOT / "docs" / "isolate.json").read_text())
    forward, training = bench["forward"], bench["training"]
    resnet = forward["transformers ResNet-18 vs paddle.vision"]
    mobile = [v["isolated"] for k, v in training.items() if k.startswith("MobileNetV1-like")]
    figures = [resnet["cumulative"], resnet["isolated"], resnet["seconds"], resnet["seconds_isolated"],
               forward["transformers BertModel vs paddlenlp (tiny)"]["isolated"],
               training["ResNet-18 example, 5 steps, clean"]["isolated"], *mobile]
    bench_md = (paths.ROOT / "docs" / "isolate.md").read_text()
    for text in (README.read_text(), README_CN.read_text(encoding="utf-8")):
        flat = " ".join(text.split())
        for figure in figures:
            assert figure in flat and figure in bench_md, figure
