"""The two runs' graphs for Google's Model Explorer (portcheck.forward.graph, `view --graph`): the JSON, written
without Model Explorer, namespaced by the module hierarchy, its edges only where the run handed one module's output
tensor to the next (never from the order of modules), each node's ratio to the allowance with the first diverging
module over 1 on both sides under one id, and each node's settings (the planted epsilon on each side); and, where
Model Explorer is installed, its split view in a headless Chromium, whose side panel's node-data table holds that
module's value over 1, and, that module selected, each side's attributes its own epsilon.
"""
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np
import pytest

from portcheck import cli, compare_forward, convert, view
from portcheck.core.errors import PipelineError
from portcheck.forward import graph
from test_view import CHROMIUM, X, models  # the planted pairs of the page's tests

EXPLORER = view.explorer_installed()


def nodes(folder, side: str) -> dict:
    data = json.loads((folder / graph.FILES[side]).read_text())
    assert data["label"] == side and [g["id"] for g in data["graphs"]] == [side]
    return {n["id"]: n for n in data["graphs"][0]["nodes"]}


def sources(node) -> list:
    return [e["sourceNodeId"] for e in node["incomingEdges"]]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = {}
    for plant in ("clean", "epsilon"):
        report = compare_forward(*models(plant), X, isolate=True)
        folder = tmp_path_factory.mktemp(plant)
        report.graphs(folder)
        out[plant] = report, folder
    return out


def test_the_graphs_nest_as_the_models_flow_as_the_run_and_hold_each_ratio(written):
    report, folder = written["epsilon"]
    assert report.first_diverging == "body.1.ln"
    t, p = nodes(folder, "torch"), nodes(folder, "paddle")
    # namespaces: the module hierarchy; a container a layer, its output a node inside it
    assert t["body.1.ln"]["namespace"] == "body/1" and t["body.1.ln"]["label"] == "ln"
    assert t["body.1"]["namespace"] == "body/1" and t["body"]["namespace"] == "body"
    # edges: each the tensor the run handed over (a container's input to its first child, its output onward)
    assert sources(t["body.0.fc"]) == [graph.INPUT] and sources(t["body.1.ln"]) == ["body.1.fc"]
    assert sources(t["body.1.fc"]) == ["body.0"] and sources(t["body.0"]) == ["body.0.act"]
    # a pair has one id on both sides, named on each side by its own module
    head = next(n for n in p.values() if n["label"] == "head")
    assert head["id"] in t and {a["key"]: a["value"] for a in head["attrs"]}["call"] == "head"
    assert set(t) == set(p) and sources(p["body.1.ln"]) == ["body.1.fc"]
    for side in graph.SIDES:
        assert all(e in (t if side == "torch" else p) for n in (t if side == "torch" else p).values()
                   for e in sources(n))
        cumulative = json.loads((folder / graph.DATA[side, "cumulative"]).read_text())[side]
        isolated = json.loads((folder / graph.DATA[side, "isolated"]).read_text())[side]
        assert cumulative["thresholds"][0]["value"] == 1 and isolated["thresholds"][0]["value"] == 1
        assert cumulative["results"]["body.1.ln"]["value"] > 1 and isolated["results"]["body.1.ln"]["value"] > 1
        assert all(v["value"] < 1 for k, v in cumulative["results"].items() if k.startswith("body.0"))
        assert all(v["value"] < 1 for k, v in isolated["results"].items() if k != "body.1.ln")
    assert json.loads((folder / graph.MAPPING).read_text())["mapping"]["body.1.ln"] == "body.1.ln"
    # each node's settings as its side's record keeps them (mapping.settings): the planted epsilon on each side
    said = {side: {a["key"]: a["value"] for a in n["body.1.ln"]["attrs"]} for side, n in (("torch", t), ("paddle", p))}
    assert (said["torch"]["eps"], said["paddle"]["eps"]) == ("1e-05", "0.001") and said["torch"]["bias"] == "True"
    assert {a["key"]: a["value"] for a in t["body.0.act"]["attrs"]}["approximate"] == "none"
    assert {a["key"]: a["value"] for a in p["body.0.ln"]["attrs"]}["eps"] == "1e-05"
    clean = written["clean"][1]
    values = json.loads((clean / graph.DATA["torch", "cumulative"]).read_text())["torch"]["results"]
    assert values and all(v["value"] < 1 for v in values.values())


def test_an_edge_is_never_drawn_where_the_run_handed_no_module_output():
    import paddle
    import torch

    class Doubled(torch.nn.Module):  # b reads a value a's output only leads to: a computation, not a module's output
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.b(self.a(x) * 2)

    class PDoubled(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.a, self.b = paddle.nn.Linear(8, 8), paddle.nn.Linear(8, 8)

        def forward(self, x):
            return self.b(self.a(x) * 2)
    t, p = Doubled().eval(), PDoubled().eval()
    convert(t, p, inputs=X)
    report = compare_forward(t, p, X)
    flows = report.flow["torch"]
    assert flows["in"]["a"] == [graph.INPUT] and flows["in"]["b"] == []
    t_nodes = {n["id"]: n for n in graph.graphs(report, [], [])["torch.json"]["graphs"][0]["nodes"]}
    assert sources(t_nodes["b"]) == [] and sources(t_nodes["a"]) == [graph.INPUT]
    assert "no module's output" in {a["key"]: a["value"] for a in t_nodes["b"]["attrs"]}["input"]


def test_graphs_never_overwrite_a_file_portcheck_did_not_write(written, tmp_path):
    report = written["clean"][0]
    mine = tmp_path / graph.FILES["torch"]
    mine.write_text("my own graph")
    with pytest.raises(PipelineError, match=r"portcheck did not write it.*\[PC192\]"):
        report.graphs(tmp_path)
    assert mine.read_text() == "my own graph"
    report.graphs(tmp_path / "again")
    report.graphs(tmp_path / "again")  # its own: written again


def test_a_forged_mark_or_a_linked_graph_is_never_trusted_or_written_through(written, tmp_path, monkeypatch, capsys):
    """The graphs' folder is the project's by its mark (fileio.claim_folder, as a record's folder is): a link by the
    mark's name marks nothing, and a link by a graph's name in the project's own folder is never written through,
    nor shown by `view --graph`."""
    report, elsewhere = written["clean"][0], tmp_path / "elsewhere.txt"
    elsewhere.write_text("someone's file")
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / graph.FILES["torch"]).write_text("my own graph")
    (forged / graph.MARK).symlink_to(elsewhere)  # a mark that is a link: a file's, followed by is_file()
    with pytest.raises(PipelineError, match=r"portcheck did not write it.*\[PC192\]"):
        report.graphs(forged)
    assert (forged / graph.FILES["torch"]).read_text() == "my own graph" and elsewhere.read_text() == "someone's file"
    own = tmp_path / "own"
    report.graphs(own)
    assert (own / graph.MARK).is_file() and not (own / graph.MARK).is_symlink()
    (own / graph.FILES["paddle"]).unlink()
    (own / graph.FILES["paddle"]).symlink_to(elsewhere)
    with pytest.raises(PipelineError, match=r"symbolic link.*\[PC206\]"):
        report.graphs(own)
    assert elsewhere.read_text() == "someone's file"
    monkeypatch.setattr(view, "explorer_installed", lambda: True)
    for folder in (own, forged):  # a graph that is a link, a mark that is a link: no graphs portcheck wrote
        with pytest.raises(SystemExit) as e:
            cli.main(["view", str(folder), "--graph"])
        assert e.value.code == 2 and "[PC194]" in capsys.readouterr().err


def test_view_graph_says_how_to_install_model_explorer_or_what_the_folder_lacks(written, tmp_path, monkeypatch,
                                                                                 capsys):
    folder = written["epsilon"][1]
    monkeypatch.setitem(sys.modules, "model_explorer", None)  # as where the extra is not installed
    with pytest.raises(SystemExit) as e:
        cli.main(["view", str(folder), "--graph"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.splitlines()) == 1
    assert view.EXTRA in err and view.EXTRA_LIB in err and "[PC193]" in err
    monkeypatch.setattr(view, "explorer_installed", lambda: True)
    with pytest.raises(SystemExit) as e:
        cli.main(["view", str(tmp_path), "--graph"])
    assert e.value.code == 2 and "[PC194]" in capsys.readouterr().err


def test_the_install_line_and_the_librarys_extra_name_the_same_pins():
    """PC193's line names requirements-view.txt (portcheck is installed from its checkout, not PyPI) and the
    library's extra `view`: the two install the same pinned Model Explorer."""
    import tomllib
    root = Path(__file__).resolve().parent.parent
    extra = tomllib.loads((root / "lib" / "pyproject.toml").read_text())["project"]["optional-dependencies"]["view"]
    pins = (root / "requirements-view.txt").read_text().split("# ---")[0].splitlines()
    assert sorted(extra) == sorted(p for p in pins if p and not p.startswith("#")) and all("==" in p for p in extra)
    assert view.EXTRA.endswith("requirements-view.txt") and view.EXTRA_LIB.endswith('"./lib[view]"')


@pytest.mark.skipif(not EXPLORER, reason=f"Model Explorer is not installed here: {view.EXTRA}")
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here: apt-get install -y chromium")
def test_model_explorer_shows_both_graphs_side_by_side_with_the_first_diverging_module_over_1(written):
    from tools.headless import Browser, free_port
    report, folder = written["epsilon"]
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "portcheck", "view", str(folder), "--graph", "--port", str(port),
                               "--no-browser"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        said = server.stdout.readline()
        assert "side by side: http://127.0.0.1:" in said, said
        url = said.split("side by side: ", 1)[1].split(" ")[0]
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/check_health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                assert time.time() < deadline and server.poll() is None, "Model Explorer did not start"
                time.sleep(0.5)
        with Browser() as b:
            b.open(url)
            assert b.wait("document.querySelectorAll('canvas').length >= 2", 60), "no graph drawn"
            table = """[...document.querySelectorAll('table')].filter(t => t.innerText.includes('ratio to'))
                .map(t => [...t.querySelectorAll('tr')]
                .map(r => [...r.querySelectorAll('td')].map(c => c.innerText)))"""
            assert b.wait(f"{table}.length >= 4", 60), "no node data shown"
            tables = b.value(table)
            # the first diverging module selected in both panes: each side panel's attributes hold its own epsilon
            state = json.loads(unquote(url.split("?data=", 1)[1].split("&", 1)[0]))
            for pane in state["uiState"]["paneStates"]:
                pane["selectedNodeId"] = report.first_diverging
            b.open(url.split("?data=", 1)[0] + f"?data={quote(json.dumps(state))}&" + url.split("&", 1)[1])
            eps = """[...document.querySelectorAll('tr')].map(r => [...r.querySelectorAll('td')].map(c => c.innerText))
                .filter(r => r[0] === 'eps')"""
            assert b.wait(f"{eps}.length >= 2", 60), "no settings shown"
            assert b.value(eps) == [["eps", "1e-05"], ["eps", "0.001"]]  # torch's pane, then Paddle's
        values = json.loads((folder / graph.DATA["torch", "cumulative"]).read_text())["torch"]["results"]
        first = values[report.first_diverging]["value"]
        assert first > 1
        # each pane's node-data table (a row: #, the node's label, each provider's value): the module over 1 on both
        panes = [t for t in tables if any(len(r) >= 4 and r[1] == "ln" for r in t)]
        assert len(panes) == 2, tables
        for t in panes:
            shown = [float(v) for r in t if len(r) > 2 and r[1] == "ln" for v in r[2:] if v != "-"]
            assert any(v == pytest.approx(first, rel=1e-6) for v in shown), shown
    finally:
        server.terminate()
        server.wait(10)


def test_the_readmes_split_view_is_the_tools_photograph():
    """docs/img/explorer_split.png is tools/explorer_split.py's photograph: a PNG of the viewport it sets."""
    import struct
    from bert_sst2 import paths
    spec = importlib.util.spec_from_file_location("explorer_split", paths.ROOT / "tools" / "explorer_split.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    head = (paths.ROOT / "docs" / "img" / "explorer_split.png").read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == tool.SIZE
