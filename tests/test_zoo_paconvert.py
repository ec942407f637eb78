"""The zoo's ports made with PaConvert (tools/zoo/paconvert.py; docs/zoo.md, Ports made with PaConvert), and the
PaConvert page's command (docs/paconvert.md):
- each model's fast run (forward cumulative, every plant) says what its row of docs/bench/zoo_paconvert.json says:
  a correct port green, each plant red at its module;
- PaConvert, where it is installed (requirements-paconvert.txt; CI installs it), writes from each torch file what
  examples/paconvert/as_converted/ holds, and the page's command prints what the page says;
- every change from PaConvert's output to the port is a hand fix marked as one."""
import functools
import json
import re
import subprocess

import pytest

pytest.importorskip("torch")
pytest.importorskip("paddle")

from bert_sst2.paths import ROOT  # noqa: E402 (after the skips)
from portcheck.core.errors import PipelineError  # noqa: E402
from tools.zoo import paconvert, recorded  # noqa: E402

RECORDED = ROOT / "docs" / "bench" / recorded.PACONVERT_JSON
ROWS = {r["model"]: r for r in json.loads(RECORDED.read_text())["results"]}
NOT_INSTALLED = f"paconvert is not installed here (pip install --no-deps -r {paconvert.REQUIREMENTS}; CI installs it)"


@functools.lru_cache(maxsize=None)
def fast(name: str) -> dict:
    return paconvert.judge_one(name, fast=True)


def test_every_model_has_its_row():
    assert list(ROWS) == list(paconvert.MODELS)


@pytest.mark.parametrize("name", list(paconvert.MODELS))
def test_the_models_fast_run_says_what_its_row_says(name):
    row, got = ROWS[name], fast(name)
    if "forward" not in row:  # refused, raises: its one line
        assert (got["outcome"], got["said"]) == (row["outcome"], row["said"])
        return
    assert got.get("forward"), got.get("forward_said") or got.get("said")
    assert row["forward"] and row["outcome"].startswith("green"), row["outcome"]
    assert [(p["plant"], p["red"], p["named"]) for p in got["plants"]] == \
        [(p["plant"], p["red"], p["named"]) for p in row["plants"]], got["plants"]
    assert got["outcome"] == row["outcome"] == "green, every plant red at its module"


@pytest.mark.parametrize("name", list(paconvert.MODELS))
def test_paconvert_writes_what_is_committed(name):
    if not paconvert.installed():
        pytest.skip(NOT_INSTALLED)
    again = paconvert.convert_again(name)
    assert again["text"] == (paconvert.AS_CONVERTED / f"pd_{name}.txt").read_text(encoding="utf-8")
    assert {"rate": again["rate"], "left": again["left"], "as_committed": True} == ROWS[name]["paconvert"]


@pytest.mark.parametrize("name", list(paconvert.MODELS))
def test_every_change_to_paconverts_output_is_a_marked_hand_fix(name):
    fixes = paconvert.hand_fixes(name)
    assert paconvert.unmarked(fixes) == []
    assert len(fixes) == ROWS[name]["hand_fixes"]
    assert (name == "mlp") == (fixes == [])  # the MLP is the one PaConvert's output runs as written


def test_an_unmarked_change_is_found():
    planted = [(["        self.relu = paddle.nn.ReLU(inplace=True)"], ["        self.relu = paddle.nn.ReLU()"]),
               (["x = a.div_(2.0)"], ["x = a / 2.0  # hand fix: div_ takes a tensor"])]
    assert paconvert.unmarked(planted) == planted[:1]


def test_a_plants_line_must_stand_once_in_the_port():
    with pytest.raises(PipelineError, match="stands 0 times in pd_cnn.py"):
        paconvert.port_module("cnn", ("a plant", "fc", "no such line", "x"))


def test_a_whole_run_without_paconvert_and_an_unknown_model_end_in_one_line(monkeypatch):
    monkeypatch.setattr(paconvert, "installed", lambda: "")
    for argv, says in (([], f"paconvert is not installed (a whole run converts each torch file again): pip install "
                            f"--no-deps -r {paconvert.REQUIREMENTS}"),
                       (["--only", "vit"], "--only vit: not a model of this zoo; its models: mlp cnn gpt lstm")):
        monkeypatch.setattr("sys.argv", ["tools/zoo/paconvert.py", *argv])
        with pytest.raises(PipelineError) as raised:
            paconvert.main()
        assert str(raised.value) == says


def test_the_pages_paconvert_command_prints_what_the_page_says(tmp_path):
    """docs/paconvert.md's command, run here in an empty folder: it writes what as_converted/ holds of
    examples/paconvert/pt_lstm.py, and its log holds the page's printed lines."""
    from test_docs_blocks import DOCS, commands, kind, printed_as_said, printed_blocks
    if not paconvert.installed():
        pytest.skip(NOT_INSTALLED)
    held = [(code, said) for mark, code, said in printed_blocks(DOCS / "paconvert.md") if kind(mark)[0] == "run by"]
    assert held, "the page's command and what it prints"
    for code, said in held:
        log = ""
        for line in commands(code):
            words = line.split(" #")[0].split()
            assert words[0] == "paconvert", line
            words = [paconvert.installed(), *(str(ROOT / w) if (ROOT / w).exists() else w for w in words[1:])]
            proc = subprocess.run(words, cwd=tmp_path, capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, proc.stderr[-2000:]
            log += proc.stdout + proc.stderr
        assert not printed_as_said(log, said), printed_as_said(log, said)
    assert (tmp_path / "pd_lstm.py").read_text(encoding="utf-8") == \
        (paconvert.AS_CONVERTED / "pd_lstm.txt").read_text(encoding="utf-8")


def test_the_pages_excerpts_are_the_files_lines():
    """docs/paconvert.md's excerpts of the files their markers name: the lines PaConvert marked are its output's, and
    a diff's removed lines are PaConvert's output's, its added lines the port's."""
    from test_docs_blocks import DOCS, blocks
    excerpts = [(re.findall(r"examples/paconvert/[\w/]+\.(?:py|txt)", mark), code)
                for mark, code in blocks(DOCS / "paconvert.md") if mark and "examples/paconvert/" in mark]
    assert len(excerpts) == 2
    for files, code in excerpts:
        lines = [(ROOT / f).read_text(encoding="utf-8").splitlines() for f in files]
        for line in code.splitlines():
            if len(files) == 1:
                assert line in lines[0], line
            elif line != "@@":
                assert line[0] in "+-" and line[1:] in lines[line[0] == "-"], line


def test_the_chinese_zoo_page_says_the_recorded_rows():
    """docs/zoo_cn.md is kept by hand: its table of ports made with PaConvert holds each model's rate, lines marked,
    hand fixes and verdict as the recorded run says them."""
    text = (ROOT / "docs" / "zoo_cn.md").read_text(encoding="utf-8")
    section = text.split("\n## 用 PaConvert 做的移植\n")[1].split("\n## ")[0]  # other tables name families `gpt` too
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[3:-1]] for line in section.splitlines()
            if line.startswith("| `")}
    for name, r in ROWS.items():
        cells = rows.get(f"`{name}`")
        assert cells == [f"{r['paconvert']['rate']}，{r['paconvert']['left']} 行", str(r["hand_fixes"]),
                         r["outcome"].partition(":")[0]], (name, cells)
