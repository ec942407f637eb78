"""The READMEs and the docs: README_cn.md says what README.md says (same commands), and the figures the docs
report are the committed hand-in's and the benchmarks' figures (docs/<page>.md and its docs/<page>_cn.md)."""
import re

import numpy as np
import pytest

from bert_sst2 import paths
from portcheck.core.fileio import load_npy

README, README_CN = paths.ROOT / "README.md", paths.ROOT / "README_cn.md"
HAND_IN = paths.ROOT / "log_reprod"
DOCS = paths.ROOT / "docs"


def page(name) -> tuple:
    """(docs/<name>.md, docs/<name>_cn.md): where a subject's figures now live, in both languages."""
    return DOCS / f"{name}.md", DOCS / f"{name}_cn.md"
FENCE = re.compile(r"^( *)```[^\n]*\n(.*?)^\1```", re.M | re.S)


def fenced(path):
    return [m.group(2) for m in FENCE.finditer(path.read_text(encoding="utf-8"))]


def test_chinese_readme_has_the_same_commands():
    blocks = fenced(README)
    assert blocks and fenced(README_CN) == blocks
    assert "README_cn.md" in README.read_text().splitlines()[0]
    assert "README.md" in README_CN.read_text(encoding="utf-8").splitlines()[0]


def test_the_own_model_step_1_names_the_quickstart_that_ci_runs_with_the_library_alone():
    """docs/own_model.md names examples/quickstart.py as its Step 1 on a small CNN, which .ci/run runs in a venv
    holding only numpy, torch, paddlepaddle and the library, installed as the README says."""
    assert "`examples/quickstart.py` is Step 1 on a small CNN" in page("own_model")[0].read_text()
    ci = (paths.ROOT / ".ci" / "run").read_text()
    assert "pip install ./lib" in ci and "examples/quickstart.py" in ci and "pip install ./lib" in README.read_text()


def test_no_machine_paths_in_committed_text():
    committed = [paths.ROOT / "docs", paths.ROOT / "examples", HAND_IN]
    for path in [README, README_CN, *(f for folder in committed for pattern in ("*.md", "*.log", "*.json")
                                      for f in folder.rglob(pattern))]:
        text = path.read_text(encoding="utf-8", errors="replace")
        for marker in ("/work/", "/root/", "/home/", "/tmp/", "site-packages"):
            assert marker not in text, f"{path.name} names a machine path ({marker})"


@pytest.mark.skipif(not (HAND_IN / "train_align_torch.npy").is_file(), reason="no committed hand-in")
def test_reported_figures_are_the_hand_ins():
    text, text_cn = (p.read_text(encoding="utf-8") for p in page("bert"))
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
    # Step 4's worst loss and update differences, as the table writes them (5.7e-7)
    bp = {fw: load_npy(HAND_IN / f"bp_align_{fw}.npy") for fw in ("torch", "paddle")}
    for family in ("loss_", "update_"):
        worst = max(float(np.max(np.abs(np.asarray(bp["torch"][k], np.float64) - np.asarray(bp["paddle"][k], np.float64))))
                    for k in bp["torch"] if k.startswith(family))
        figures.append(f"{worst:.1e}".replace("e-0", "e-"))
    for figure in figures:
        assert figure in text and figure in text_cn, figure
    for figure in figures[:2]:
        assert figure in summary, figure
    assert np.asarray(metric["model_logits"]).shape[0] == 872  # the metric pair is on the real dev set


def test_align_figures_are_the_benchmarks():
    """The measured rule's figures (docs/tolerances.md) are docs/bench/align.md's, which tools/bench_align.py wrote."""
    bench = (paths.ROOT / "docs" / "bench" / "align.md").read_text()
    resnet = re.search(r"^\| transformers ResNet-18[^|]*\| green \| ([\d.]+) \|[^|]*\| RED \|[^|]*\| ([\d.e+]+) \| (\d+) \|$",
                       bench, re.M)
    clean_all = max(re.findall(r"^\|[^|]*\| green \| ([\d.]+) \|[^|]*\| RED \|", bench, re.M), key=float)
    train = re.search(r"^\| clean port \| green \| - \| ([\d.]+) \|$", bench, re.M).group(1)
    cost = re.search(r": ([\d.]+)x \(target", bench).group(1)
    for text in (p.read_text(encoding="utf-8") for p in page("tolerances")):
        flat = " ".join(text.split())
        for figure in (*resnet.groups(), clean_all, train, cost):
            assert re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d])", flat), figure


def test_suite_figures_are_the_benchmarks():
    """docs/bert.md's sentence on the suite (both languages) says docs/bench/suite.json's run, which
    tools/bench_suite.py wrote: its tests, its time and its strict xfails."""
    import json
    from tools.bench_suite import OUTCOMES, minutes
    suite = json.loads((DOCS / "bench" / "suite.json").read_text())["suite"]
    tests, took = sum(suite[k] for k in OUTCOMES), minutes(suite["seconds"])
    text, text_cn = (" ".join(p.read_text(encoding="utf-8").split()) for p in page("bert"))
    assert suite["failed"] == 0 and f"{tests} tests in {took}" in text and f"the {suite['xfailed']} strict" in text
    assert f"{tests} 个测试用时 {took}" in text_cn and f"{suite['xfailed']} 个严格 xfail" in text_cn


def test_llm_figures_are_the_benchmarks():
    """The large-model figures of docs/large_models.md (both languages) and lib/README are docs/bench/llm.json's, which
    tools/bench_llm.py wrote, at the 1.1B width."""
    import json
    llm = json.loads((paths.ROOT / "docs" / "bench" / "llm.json").read_text())["2048"]
    w = llm["weights_gb"]
    figures = [f"{w:.2f}", *(f"{llm[p]['peak_gb']:.2f}" for p in ("convert", "compare", "isolated")),
               f"{llm['isolated']['peak_gb'] / w:.2f}x"]
    plain = llm["forward"]["torch_seconds"] + llm["forward"]["paddle_seconds"]
    figures += [f"{llm['compare']['seconds'] / plain:.1f}x", f"{llm['isolated']['seconds'] / plain:.1f}x"]
    runs = llm["runs"]  # the repeated runs on the code measured: the isolated ratio's spread, and how often it met 4x
    figures += [f"{min(r['isolated_ratio'] for r in runs):.2f}", f"{max(r['isolated_ratio'] for r in runs):.2f}"]
    met = sum(r["isolated_ratio"] <= 4 for r in runs)
    large, large_cn = page("large_models")
    said = {large_cn: f"{len(runs)} 次中有 {met} 次"}
    for path in (large, large_cn, paths.ROOT / "lib" / "README.md"):
        flat = " ".join(path.read_text(encoding="utf-8").split())
        for figure in figures + [said.get(path, f"{met} of {len(runs)}")]:
            assert figure.rstrip("x") in flat, (path.name, figure)


def test_isolate_figures_are_the_benchmarks():
    """The isolated-judgement figures of docs/tolerances.md (both languages) are docs/bench/isolate.json's, which
    tools/bench_isolate.py wrote with docs/bench/isolate.md."""
    import json
    bench = json.loads((paths.ROOT / "docs" / "bench" / "isolate.json").read_text())
    forward, training = bench["forward"], bench["training"]
    resnet = forward["transformers ResNet-18 vs paddle.vision"]
    mobile = [v["isolated"] for k, v in training.items() if k.startswith("MobileNetV1-like")]
    figures = [resnet["cumulative"], resnet["isolated"], resnet["seconds"], resnet["seconds_isolated"],
               forward["transformers BertModel vs paddlenlp (tiny)"]["isolated"],
               training["ResNet-18 example, 5 steps, clean"]["isolated"], *mobile]
    bench_md = (paths.ROOT / "docs" / "bench" / "isolate.md").read_text()
    for text in (p.read_text(encoding="utf-8") for p in page("tolerances")):
        flat = " ".join(text.split())
        for figure in figures:
            assert figure in flat and figure in bench_md, figure


def said(figure: str, flat: str) -> bool:
    """The figure in the text as a whole number, never part of a longer one (1.97 is not 11.97 or 1.975)."""
    return re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d])", flat) is not None


def test_k_backward_figures_are_the_benchmarks():
    """The K figures of docs/tolerances.md (both languages) are docs/bench/k_backward.json's, which
    tools/bench_k_backward.py renders as docs/bench/k_backward.md: the most a clean port's gradients need, the least
    a plant of a forward shows there, the jump a plain run's steps take on the ResNet-18 example."""
    import json
    data = json.loads((DOCS / "bench" / "k_backward.json").read_text())
    rows = data["rows"] if isinstance(data, dict) else data
    need = lambda r, side, part: r[side][part]["needed"]  # noqa: E731
    late = lambda r: need(r, "plant", "grads") <= need(r, "clean", "grads")  # noqa: E731 - an optimizer's plant
    figures = [f"{max(need(r, 'clean', 'grads') for r in rows):.3g}",
               f"{min(need(r, 'plant', 'grads') for r in rows if not late(r)):.3g}",
               f"{max(need(r, 'clean', 'steps') for r in rows if not r['isolate']):.3g}"]
    bench_md = " ".join((DOCS / "bench" / "k_backward.md").read_text().split())
    for text in (p.read_text(encoding="utf-8") for p in page("tolerances")):
        flat = " ".join(text.split())
        assert "(bench/k_backward.md)" in flat
        for figure in figures:
            assert said(figure, flat) and said(figure, bench_md), figure


def test_rules_figures_are_the_benchmarks():
    """The measured figures of docs/rules.md (both languages) are docs/bench/rules.json's, formatted as
    tools/bench_rules.py renders them on docs/bench/rules.md: the lr rule's clean drift and smallest plant, the
    float32 metrics' clean gap and one sample miscounted, the rounding-noise gradient shares, the weight-norm gaps
    with dropout's own masks."""
    import json
    from tools import bench_rules
    data = json.loads((DOCS / "bench" / "rules.json").read_text())
    lr, metric, step5 = data["lr"], data["metric_float32"], data["step5"]
    noise = bench_rules.noise_figures(step5)
    gaps = step5["weight_norm_gap_with_own_masks"]["0.5"]
    figures = [f"{lr['clean_max_ulps']:,.4g}", bench_rules.sci(lr["planted_min_ulps"]),
               f"{metric['clean_max_ulps']:g}", f"{metric['planted_min_ulps']:,.0f}",
               bench_rules.sci(max(noise["noise"].values())), f"{noise['real']:.2g}",
               *(f"{gaps[k]:.2%}" for k in ("paddle", "torch, masks of seed 2", "paddle, weight decay missing"))]
    bench_md = " ".join((DOCS / "bench" / "rules.md").read_text().split())
    for text in (p.read_text(encoding="utf-8") for p in page("rules")):
        flat = " ".join(text.split())
        assert "(bench/rules.md)" in flat
        for figure in figures:
            assert said(figure, flat) and said(figure, bench_md), figure


# ---- the README's five steps ------------------------------------------------------------------------------------

def five_steps(text: str) -> tuple:
    """(the commands of a README's five-step block: each [script, args...], the table's rows: each (step number,
    its scripts, its check)), the block being the one that ends with the hand-in's check."""
    block = next(b for b in fenced_text(text) if "pipeline/check_log_reprod.py" in b and "Step1/" in b)
    commands = [line.split(" #")[0].split()[1:] for line in block.splitlines() if line.startswith("python ")]
    rows = [(int(m.group(1)), re.findall(r"`(\w+\.py)`", m.group(2)), m.group(3))
            for m in re.finditer(r"^\| (\d) [^|]*\|[^|]*\|(.*)\| `(check_step\d\.py)` \|$", text, re.M)]
    return commands, rows


def fenced_text(text: str) -> list:
    return [m.group(2) for m in FENCE.finditer(text)]


def run_all_commands() -> list:
    """run_all.py's commands on its default data, in order, each [script, args...]: what the README's steps are."""
    import argparse
    import importlib.util
    from dataclasses import fields
    from bert_sst2.flags import TrainArgs
    spec = importlib.util.spec_from_file_location("run_all", paths.ROOT / "pipeline" / "run_all.py")
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    flags = dict(model_dir=None, random_init=None, recheck=False, one_at_a_time=True, data_dir=None)
    flags.update({f.name: None for f in fields(TrainArgs) if f.metadata["forward"] and f.name != "data_dir"})
    return [cmd for step in run_all.steps(argparse.Namespace(**flags)) for cmd in step.scripts]


def five_steps_differ(text: str, ran: list) -> list:
    """What a README's five steps say that run_all and the step table do not: the block's commands are run_all's
    (setup, then each step's scripts and check, Step 5 the smoke run) and then the hand-in's check; each table row
    names its step's scripts in the order they run, then its check."""
    from bert_sst2.steps import BERT
    commands, rows = five_steps(text)
    said = []
    if commands != ran + [["pipeline/check_log_reprod.py"]]:
        said.append(f"the block's commands are not run_all's: {commands}")
    table = [(s.number, list(dict.fromkeys(n.rsplit("/", 1)[1] for p in s.pairs for n in (p.torch, p.paddle))),
              s.check.rsplit("/", 1)[1]) for s in BERT]
    if rows != table:
        said.append(f"the table's rows {rows} are not the steps' {table}")
    return said


def test_the_readmes_five_steps_are_run_alls_and_the_step_tables():
    ran = run_all_commands()
    for readme in (README, README_CN):
        assert five_steps_differ(readme.read_text(encoding="utf-8"), ran) == [], readme.name
    text = README.read_text(encoding="utf-8")
    swapped = text.replace("python pipeline/Step3/pt_loss.py\npython pipeline/Step3/pd_loss.py",
                           "python pipeline/Step3/pd_loss.py\npython pipeline/Step3/pt_loss.py")
    assert swapped != text and five_steps_differ(swapped, ran)            # planted: Paddle's side before torch's
    row = text.replace("| `pt_lr.py`, `pd_lr.py`, `pt_bp.py`, `pd_bp.py` |", "| `pt_bp.py`, `pd_bp.py` |")
    assert row != text and five_steps_differ(row, ran)                     # planted: a row missing a pair
    smoke = text.replace("pt_train.py --demo ", "pt_train.py ")
    assert smoke != text and five_steps_differ(smoke, ran)                 # planted: Step 5 not the smoke run


def test_the_readmes_hand_in_is_the_reference_runs_command_and_says_where_each_run_writes():
    """The hand-in command is the one SUMMARY.md says made the committed log_reprod/; the step commands by hand
    write log_reprod_demo/ (paths.log_reprod, git-ignored), and only a run on real data writes log_reprod/."""
    import os
    made = re.search(r"^Made by `python ([^`]+)`", (HAND_IN / "SUMMARY.md").read_text(), re.M).group(1)
    ignored = (paths.ROOT / ".gitignore").read_text().splitlines()
    saved = {k: os.environ.pop(k, None) for k in ("BERT_ALIGN_HOME", paths.REAL_DATA)}
    try:
        by_hand = paths.log_reprod()
        os.environ[paths.REAL_DATA] = "1"
        real = paths.log_reprod()
    finally:
        os.environ.pop(paths.REAL_DATA, None)
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    assert real == HAND_IN and by_hand.parent == paths.ROOT and f"{by_hand.name}/" in ignored
    for readme in (README, README_CN):
        text = readme.read_text(encoding="utf-8")
        assert [b for b in fenced_text(text) if b.split(" #")[0].strip() == f"python {made}"], readme.name
        assert f"`{by_hand.name}/`" in text and "`log_reprod/`" in text, readme.name


def test_the_readmes_five_step_figures_are_the_pipelines():
    """The accuracy bound of Step 5 is the guide's train_align threshold; the smoke run's demo set has the rows
    said."""
    from bert_sst2.tolerances import GUIDE
    bound = f"{GUIDE['train_align'].threshold:.2%}"
    rows = len(paths.DEMO_TSV.read_text(encoding="utf-8").splitlines()) - 1  # a header, then a sentence a row
    for readme, demo in ((README, f"the {rows} demo sentences"), (README_CN, f"{rows} 句演示数据")):
        text = readme.read_text(encoding="utf-8")
        assert bound in text and demo in text, (readme.name, bound, demo)
