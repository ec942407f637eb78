"""Each benchmark page (docs/bench/*.md) says the command its figures came
from and the date, CPU and load they were taken at, or, for figures measured before those were recorded, one line
saying so; a page a tool writes is that tool's rendering of the JSON beside it, byte for byte (its --page, to a
temporary folder), so no figure on it was typed by hand. In process: each tool's main() with --page reads JSON
and writes Markdown, nothing is measured."""
import importlib
import re
import shutil
import sys

import pytest

from bert_sst2 import paths
from tools import bench_backward, bench_doc

DOCS = paths.ROOT / "docs"
# {page: (the tool that writes it, the files it reads beside it, its arguments writing into a folder)}
WRITTEN = {
    "bench/align.md": ("bench_align", ["align.json"], lambda d: ["--out", d / "align.md"]),
    "bench/isolate.md": ("bench_isolate", ["isolate.json"], lambda d: ["--out", d / "isolate.md"]),
    "bench/bench_dropout.md": ("bench_dropout", ["bench_dropout.json"], lambda d: ["--out", d / "bench_dropout"]),
    "bench/bench_speed.md": ("bench_speed", ["bench_speed.json"], lambda d: ["--out", d / "bench_speed"]),
    "bench/run.md": ("bench_run", ["run.json"], lambda d: ["--json", d / "run.json"]),
    "bench/stream.md": ("bench_stream", ["stream.json"], lambda d: ["--out", d / "stream.md"]),
    "bench/page.md": ("bench_page", ["page.json"], lambda d: ["--out", d / "page.md"]),
    "bench/llm.md": ("bench_llm", ["llm.json", "llm.png"], lambda d: ["--out", d / "llm.md"]),
    "bench/zoo.md": ("zoo.run", ["zoo.json", "zoo_families.json"], lambda d: ["--out", d / "zoo.md", "--guide",
                                                                              d / "guide.md"]),
    "bench/generate.md": ("bench_generate", ["generate.json"], lambda d: ["--out", d / "generate.md"]),
    "bench/backward.md": ("bench_backward", ["backward.json"], lambda d: ["--out", d / "backward.md"]),
    "bench/split.md": ("bench_split", ["split.json"], lambda d: ["--out", d / "split.md"]),
    "bench/infer.md": ("bench_infer", ["infer.json"], lambda d: ["--out", d / "infer.md"]),
    "bench/k_backward.md": ("bench_k_backward", ["k_backward.json", "k_backward_kinks.json"],
                            lambda d: ["--out", d / "k_backward.md"]),
    # two runs' parts (the small and deep nets', the dense net's), each its command
    "bench/bn_few_values.md": ("bn_few_values", ["bn_few_values.json"], lambda d: ["--out", d / "bn_few_values.md"]),
    # three tools' parts (tools/lr_ulps.py, metric_ulps.py, step5_rules.py) and what was measured by hand, one page
    "bench/rules.md": ("bench_rules", ["rules.json"], lambda d: ["--out", d / "rules.md"]),
    # the zoo's own run, its figures recorded in the JSON: the tool renders them, measuring nothing
    "bench/zoo_kernels.md": ("bench_zoo_kernels", ["zoo_kernels.json"], lambda d: ["--out", d / "zoo_kernels.md"]),
    # profiles, levers and epochs measured by hand, each with its method, command, date, CPU and load recorded in
    # the JSON; the headline step is bench_speed's
    "bench/suite.md": ("bench_suite", ["suite.json"], lambda d: ["--out", d / "suite.md"]),
    "bench/speed.md": ("bench_profile", ["speed.json", "bench_speed.json"], lambda d: ["--out", d / "speed.md"]),
}
# written by hand, its command named: a tool installed aside (padiff)
BY_HAND = {"bench/padiff.md"}
# the command as typed: the environment variables it ran under, its niceness, then python
COMMAND = re.compile(r"Measured by `(?:[A-Z_]+=\S+ )*(?:nice -n \d+ )?python ")


def pages():
    return sorted({p.relative_to(DOCS).as_posix() for p in (DOCS / "bench").glob("*.md")})


def test_every_benchmark_page_is_written_by_a_tool_or_said_by_hand():
    assert set(pages()) == set(WRITTEN) | BY_HAND


@pytest.mark.parametrize("page", pages())
def test_a_benchmark_page_names_its_command_and_when_where_and_at_what_load(page):
    line = (DOCS / page).read_text(encoding="utf-8").splitlines()[2]
    assert COMMAND.match(line), line
    said = all(f in line for f in ("(UTC)", "cores", "1-min load")) and bench_doc.NOT_RECORDED not in line
    assert said or bench_doc.NOT_RECORDED in line, line


@pytest.mark.parametrize("page", sorted(WRITTEN))
def test_the_tool_renders_the_committed_page_from_its_json(page, tmp_path, monkeypatch):
    name, beside, argv = WRITTEN[page]
    for f in beside:
        shutil.copy((DOCS / page).parent / f, tmp_path / f)
    tool = importlib.import_module(f"tools.{name}")
    monkeypatch.setattr(sys, "argv", [f"tools/{name}.py", "--page", *map(str, argv(tmp_path))])
    tool.main()
    assert (tmp_path / page.split("/")[-1]).read_text(encoding="utf-8") == (DOCS / page).read_text(encoding="utf-8")


def test_the_speed_page_refuses_a_bench_speed_run_it_does_not_describe(tmp_path, monkeypatch):
    """speed.md renders bench_speed.json's headline step under speed.json's description of that run (torch's
    AdamW, the method): a run taken again since (planted: its command and load changed) stops the page, one line."""
    import json
    from portcheck.core.errors import PipelineError
    from tools import bench_profile
    shutil.copy(DOCS / "bench" / "speed.json", tmp_path / "speed.json")
    report = json.loads((DOCS / "bench" / "bench_speed.json").read_text())
    report[bench_doc.RUN] = {"command": "python tools/bench_speed.py --quick", "date": "2026-11-28", "cpu": "x86_64",
                             "cores": 2, "load before": 0.2, "load after": 0.3}
    (tmp_path / "bench_speed.json").write_text(json.dumps(report))
    monkeypatch.setattr(sys, "argv", ["tools/bench_profile.py", "--page", "--out", str(tmp_path / "speed.md")])
    with pytest.raises(PipelineError, match="another run"):
        bench_profile.main()
    assert not (tmp_path / "speed.md").exists()


def test_the_header_says_the_facts_recorded_and_which_were_not(monkeypatch):
    run = bench_doc.finish(bench_doc.start(["tools/bench_align.py", "--repeats", "3"]))
    assert run["command"] == bench_doc.setting() + "python tools/bench_align.py --repeats 3"  # niced: said first
    assert run["cores"] >= 1 and run["cpu"]
    line = bench_doc.header(run, "python tools/bench_align.py")
    assert f"on {run['date']} (UTC)" in line and "1-min load" in line and bench_doc.NOT_RECORDED not in line
    assert bench_doc.NOT_RECORDED in bench_doc.header({}, "python tools/bench_align.py")
    # a command that records nothing itself (the zoo's run, its figures entered in a JSON): what to do said instead
    assert bench_doc.header({}, "python -m tools.zoo.run", "enter them").endswith("(enter them).")
    partly = bench_doc.header({"cpu": "x86_64", "cores": 2, "load before": 0.9, "load after": 1.4}, "python t.py")
    assert "Its date was " + bench_doc.NOT_RECORDED in partly and "0.9 before and 1.4 after" in partly
    assert bench_doc.header([run, {}], "python t.py").count("Measured by") == 2  # rows from two runs: both said
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    said = bench_doc.start(["tools/bench_backward.py"], env=("OMP_NUM_THREADS", "OMP_WAIT_POLICY"))["command"]
    assert COMMAND.match(f"Measured by `{said}`") and said.startswith("OMP_NUM_THREADS=1 ") and "WAIT" not in said
    inside = str(paths.ROOT / "docs" / "bench" / "align.md")  # no machine's path on a committed page
    assert bench_doc.command([str(paths.ROOT / "tools" / "bench_align.py"), "--out", inside]) == \
        "python tools/bench_align.py --out docs/bench/align.md"


def test_the_guides_say_the_benchmarks_figures_and_link_there():
    """Where a guide gives a measured figure, in both languages, it is the one the benchmark's JSON holds, and the
    sentence links to its page: a block's records, compare_backward's and compare_split's cost
    (docs/large_models.md), a launched pair's run (docs/run.md)."""
    import json
    read = lambda name: json.loads((DOCS / "bench" / name).read_text())
    backward = read("backward.json")["cpu seconds"]
    split = read("split.json")["2"]
    launched = read("run.json")["launched"]
    ratio = split["compare"]["cpu"] / split["plain"]["cpu"]
    said = {"large_models": ["(bench/stream.md#a-blocks-records)", "(bench/backward.md)",
                             f"{backward['compare_backward']['median']:.2f} s",
                             f"{backward[bench_backward.METHOD]['median']:.2f} s", "(bench/split.md)",
                             f"{split['compare']['cpu']:g} s", f"{ratio:.0f}"],
            "run": ["(bench/run.md#launched-pairs)", *(f"{launched[p]['cpu seconds']:g} s" for p in ("ddp", "tp"))]}
    for stem, figures in said.items():
        for page in (DOCS / f"{stem}.md", DOCS / f"{stem}_cn.md"):
            flat = " ".join(page.read_text(encoding="utf-8").split())
            assert all(f in flat for f in figures), (page.name, [f for f in figures if f not in flat])


def test_a_rules_part_written_keeps_the_others_and_its_page_says_its_run(tmp_path):
    """docs/bench/rules.json holds three tools' parts and what was measured by hand: a tool's run replaces its own
    part (planted: lr_ulps' figures again, with the run's facts), keeps the others, and writes the page again, its
    header now saying that run's date, CPU and load and the other parts' as not recorded."""
    import json
    from tools import bench_rules
    shutil.copy(DOCS / "bench" / "rules.json", tmp_path / "rules.json")
    before = json.loads((tmp_path / "rules.json").read_text())
    run = bench_doc.finish(bench_doc.start(["tools/lr_ulps.py"]))
    bench_rules.write_part(tmp_path / "rules.json", "lr", before["lr"], run)
    after = json.loads((tmp_path / "rules.json").read_text())
    assert after["lr"][bench_doc.RUN] == run and {k: after[k] for k in before if k != "lr"} == \
        {k: before[k] for k in before if k != "lr"}
    header = (tmp_path / "rules.md").read_text(encoding="utf-8").splitlines()[2]
    assert COMMAND.match(header) and f"on {run['date']} (UTC)" in header and bench_doc.NOT_RECORDED in header


def test_the_kernels_page_takes_every_figure_from_the_zoos_run(tmp_path, monkeypatch):
    """tools/bench_zoo_kernels.py --run: zoo_kernels.json and its page from the JSON the zoo's run wrote beside its
    --out (a small one): the verdicts, a differing one said, a kink's line and a training's final metric as the
    library said them, the run's folder outside the repository said as DIR; a run not under torch's scalar kernels
    refused in one line."""
    import json
    from portcheck.core.errors import PipelineError
    from tools import bench_zoo_kernels
    kink = ("kink in step 2's forward: stages.3's input holds 1 value(s) within rounding of 0 (torch's own fp32 "
            "error there, or calibrated.FLOOR x eps32 x its largest) on the other side of it in Paddle's run, where "
            "a ReLU or max after it branches (torch 7.100e-06, paddle -4.900e-06)")
    final = ("final metric: accuracy torch 0.26 vs paddle 0.255, diff 0.005 (<= the threshold 0.0065): torch's own "
             f"spread is over the task's 0.0015, {bench_zoo_kernels.BEYOND}")
    judged = lambda rule, passed, used, where="", detail="": {"rule": rule, "passed": passed, "used": used,
                                                               "where": where, "detail": detail}
    backward, curves = bench_zoo_kernels.RULES[0], "training curves"
    results = [{"case": "net", "plant": None, "got": "ok",
                "judgements": [judged(backward, True, 0.25, detail=f"{kink}; torch's run again ... allowed")]},
               {"case": "net", "plant": "epsilon", "got": "ok", "judgements": [judged(backward, False, 1.2e4, "bn")]},
               {"case": "digits", "plant": None, "got": "ok", "judgements": [judged(curves, True, 0.0, detail=final)]},
               {"case": "digits", "plant": "decay", "got": "ok",
                "judgements": [judged(curves, False, 1.0, "weight norm", "weight norm: parts at step 0")]},
               {"case": "mlp", "plant": None, "got": "false red", "judgements": [judged(backward, False, 3.0, "fc")]}]
    rules = [{"rule": r, "clean": 0.5, "clean_case": "net", "planted": 1.3, "planted_case": "net: epsilon",
              "margin": 2.6} for r in bench_zoo_kernels.RULES]
    facts = {"command": "ATEN_CPU_CAPABILITY=default python -m tools.zoo.run --out /tmp/k/zoo.md --guide "
                        "/tmp/k/guide.md", "date": "2026-11-29", "cpu": "x86_64", "cores": 2, "load before": 0.5,
             "load after": 0.7}
    (tmp_path / "zoo.json").write_text(json.dumps({"seconds": 90, "run": facts, "rules": rules, "results": results}))
    page = tmp_path / "zoo_kernels.md"
    monkeypatch.setattr(sys, "argv", ["tools/bench_zoo_kernels.py", "--run", str(tmp_path / "zoo.json"), "--out",
                                      str(page)])
    bench_zoo_kernels.main()
    held = json.loads(page.with_suffix(".json").read_text())
    assert held["verdicts"] == 5 and held["differing"] == ["mlp: (correct port): false red"]
    assert held["run"]["command"].endswith("--out DIR/zoo.md --guide DIR/guide.md") and "/tmp" not in page.read_text()
    net, digits = held["ports"]
    assert (net["case"], net["said"], net["judged"], net["used"]) == ("net", [kink], ["later"], 0.25)
    assert net["plants"] == [{"plant": "epsilon", "verdict": "ok", "red at": "bn", "used": 1.2e4}]
    assert (digits["case"], digits["said"], digits["judged"]) == ("digits", [final[len("final metric: "):]],
                                                                   ["training"])
    assert "1 differing from the zoo's table" in page.read_text() and "torch 7.100e-06" in page.read_text()
    facts["command"] = facts["command"].removeprefix("ATEN_CPU_CAPABILITY=default ")
    (tmp_path / "zoo.json").write_text(json.dumps({"seconds": 90, "run": facts, "rules": rules, "results": results}))
    with pytest.raises(PipelineError, match="scalar kernels"):
        bench_zoo_kernels.main()


def test_the_few_values_table_and_figures_are_the_benchmarks():
    """docs/tolerances.md's table of values per channel (both languages) is docs/bench/bn_few_values.json's as
    tools/bn_few_values.py writes it, row for row, and the figures its prose gives are the JSON's: the smallest N
    clean, the worst a correct port uses at 2 (each net), at 8 (the dense net) and at 16."""
    import json
    from tools import bn_few_values
    data = json.loads((DOCS / "bench" / "bn_few_values.json").read_text())
    lines = bn_few_values.table(data)
    cells = bn_few_values.cells(data)
    worst = lambda n, net=None: f"{max(c['worst'] for c in cells if c['n'] == n and net in (None, c['net'])):.3g}"
    said = {"tolerances.md": [f"every plant red in every setting is {bn_few_values.smallest(data)}."],
            "tolerances_cn.md": [f"所有植入都为红的最小 N 是 {bn_few_values.smallest(data)}。"]}
    figures = [worst(2, "small"), worst(2, "deep"), worst(8, "dense"), worst(16)]
    for name, sentences in said.items():
        text = (DOCS / name).read_text(encoding="utf-8")
        rows = text.splitlines()
        start = rows.index(lines[0])
        after = rows[start + len(lines):start + len(lines) + 1]
        assert rows[start:start + len(lines)] == lines and not (after and after[0].startswith("|")), name
        prose = re.sub(r"\s+", "", text[:text.index(lines[0])])  # lines broken anywhere, in Chinese too
        assert all(re.sub(r"\s+", "", s) in prose for s in sentences), (name, sentences)
        missing = [f for f in figures if not re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", prose)]
        assert not missing, (name, missing)


def test_a_few_values_run_replaces_its_nets_cells_keeps_the_others_and_a_bad_json_is_one_line(tmp_path, monkeypatch):
    """tools/bn_few_values.py: a run's cells replace those of its nets and sizes (planted: the dense net at 8 again),
    the other parts kept and a part left with none dropped; a JSON not its own stops the page in one line."""
    import json
    from portcheck.core.errors import PipelineError
    from tools import bn_few_values
    data = json.loads((DOCS / "bench" / "bn_few_values.json").read_text())
    dense8 = [{**c, "red": 3} for c in bn_few_values.cells(data) if (c["net"], c["n"]) == ("dense", 8)]
    after = bn_few_values.merged(data, {"cells": dense8, bench_doc.RUN: {"command": "python t.py"}})
    assert [c for c in bn_few_values.cells(after) if (c["net"], c["n"]) == ("dense", 8)] == dense8
    assert len(bn_few_values.cells(after)) == len(bn_few_values.cells(data)) and after["parts"][-1]["cells"] == dense8
    only = {"parts": [{"cells": dense8}]}
    assert bn_few_values.merged(only, {"cells": dense8})["parts"] == [{"cells": dense8}]
    (tmp_path / "bn_few_values.json").write_text(json.dumps({"parts": [{"cells": [{"n": 8}]}]}))
    monkeypatch.setattr(sys, "argv", ["tools/bn_few_values.py", "--page", "--out", str(tmp_path / "bn_few_values.md")])
    with pytest.raises(PipelineError, match="not this tool's JSON"):
        bn_few_values.main()
    assert not (tmp_path / "bn_few_values.md").exists()
