"""Issue 84's hostile cases on the page, the Handin folder and its names.

A page left in a hand-in folder is bound to the folder's manifest and verdict: a folder reused for a red pair, or
written by two Handin objects in turn, never keeps a page saying green, and `check` is red in one line where a
page in the folder says another verdict or run. A name holding a bidirectional override, a control character, a
line separator or a byte that was not UTF-8 is shown escaped on the page, in its own element, after the verdict
word; it never stops the page's writer."""
import json
import re

import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
pytest.importorskip("sklearn.datasets")

import portcheck  # noqa: E402
from portcheck import cli  # noqa: E402
from portcheck.core import page  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402
from examples.mlp_pair import PaddleNet, first_batch, torch_net  # noqa: E402
from test_view import BROWSER_OWN, CHROMIUM, HOSTILE, browse, host  # noqa: E402  (the pages' browser and its proxy)


class GeluTanh(PaddleNet):  # the realistic plant: GELU's tanh form where torch's is exact
    def __init__(self):
        super().__init__()
        self.act = paddle.nn.GELU(approximate=True)


def said_by_page(top) -> dict:
    return page.data_of(top / "diagnostics" / page.NAME)


def checked(top, capsys):
    capsys.readouterr()
    red = cli.check(top, only=["forward"])
    return red, capsys.readouterr().out


def test_a_folder_reused_for_a_red_pair_keeps_no_green_page(tmp_path, capsys):
    top = tmp_path / "log_reprod"
    x, _ = first_batch()
    green = portcheck.Handin(top)
    green.forward(torch_net(), PaddleNet(), x)
    assert green.passed and said_by_page(top)["passed"] is True
    assert checked(top, capsys)[0] == 0
    red = portcheck.Handin(top)  # a second object on the same folder, a planted bug
    red.forward(torch_net(), GeluTanh(), x)
    data = said_by_page(top)
    assert not red.passed and data["passed"] is False
    assert data["run"] and data["folder"] == str(top.absolute())
    text = (top / "diagnostics" / page.NAME).read_text(encoding="utf-8")
    assert re.search(r'<header class="red" data-verdict="red"[^>]*><h1><span id="verdict">RED</span>', text)
    assert "hand-in folder" in text and data["run"][:12] in text  # opened from disk, it says which folder and run
    n, out = checked(top, capsys)
    assert n >= 1 and "PC970" not in out  # red, and its page says so: no disagreement


def test_check_is_red_in_one_line_where_the_folders_page_says_another_verdict_or_run(tmp_path, capsys):
    top = tmp_path / "log_reprod"
    x, _ = first_batch()
    portcheck.Handin(top).forward(torch_net(), GeluTanh(), x)
    where = top / "diagnostics" / page.NAME
    text = where.read_text(encoding="utf-8")
    # a page put back from a green run: the header and its data say green beside a red folder
    forged = text.replace('"passed": false', '"passed": true', 1)
    where.write_text(forged, encoding="utf-8")
    n, out = checked(top, capsys)
    lines = [line for line in out.splitlines() if "PC970" in line]
    assert n >= 2 and len(lines) == 1 and "says green where the folder is red" in lines[0], out
    # a page of another run of the folder (its manifest's seal) is not the folder's page either
    data = json.loads(re.search(r'id="portcheck-data">(.*?)</script>', text).group(1))
    where.write_text(text.replace(data["run"], "0" * 64), encoding="utf-8")
    out = checked(top, capsys)[1]
    assert "describes another run of the folder" in out and "PC970" in out
    # the writers' own next hand-in drops it and writes the folder's page again
    where.write_text(forged, encoding="utf-8")
    portcheck.Handin(top).forward(torch_net(), GeluTanh(), x)
    assert "PC970" not in checked(top, capsys)[1]


HIDDEN = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200f",
          "\x1b", "\x00", "\r", "\u2028", "\u2029", "\udcff"]  # what lays a name out as something else, or cannot be written


def test_no_name_reorders_or_stands_in_for_the_verdict_on_the_page(tmp_path):
    """A folder, module, key and file name holding a bidirectional override, a control character, a line separator
    or a byte that was not UTF-8: the page is written (no UnicodeEncodeError), each shown as its escape, as the
    terminal shows it, and the verdict word and the first diverging module come before any name the user gave."""
    name = "blk\u202e.NEERG\u2066x\u2028\x1b[32m\udcff"
    row = {"name": name, "verdict": "RED", "max diff": 1.0, "why": "key \u202eNEERG"}
    data = {"title": "portcheck.Handin \u202eNEERG :tluser", "passed": False, "headline": "red at \u2028forward: green",
            "first": {"torch": name, "paddle": "p\u202e"}, "verdicts": [{"name": name, "passed": False,
                                                                      "text": f"forward: RED at {name}"}],
            "sections": [{"kind": "tree", "title": name, "rows": [row]}, {"kind": "table", "title": "t", "rows": [row]},
                         {"kind": "lines", "title": "l", "lines": [name]}]}
    said = page.write(data, tmp_path / "p.html")
    assert said.startswith("page: ")
    text = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert not [c for c in HIDDEN if c in text], [hex(ord(c)) for c in HIDDEN if c in text]
    assert "blk\\u202e.NEERG\\u2066x\\u2028\\x1b[32m\\udcff" in text  # errors.one_line's form, the terminal's
    header = re.search(r"<h1>(.*?)</h1>", text).group(1)
    assert header.startswith('<span id="verdict">RED</span> <bdi>')  # the verdict word first, outside every name
    assert '<span id="header-module">first diverging: <bdi>blk\\u202e' in header
    assert page.data_of(tmp_path / "p.html")["first"]["torch"] == name  # the data keeps the name as it is


def test_a_handin_folder_named_to_spoof_its_verdict_shows_it_escaped(tmp_path, capsys):
    x, _ = first_batch()
    for folder in ("\u202eNEERG_reprod", "bad\udcff\u2028_reprod"):
        top = tmp_path / folder
        portcheck.Handin(top).forward(torch_net(), GeluTanh(), x)
        text = (top / "diagnostics" / page.NAME).read_text(encoding="utf-8")
        assert not [c for c in HIDDEN if c in text]
        assert re.search(r'<h1><span id="verdict">RED</span> <bdi>portcheck.Handin \\u202e|'
                         r'<h1><span id="verdict">RED</span> <bdi>portcheck.Handin bad\\udcff\\u2028', text)
        n, out = checked(top, capsys)
        assert n >= 1 and "PC970" not in out


@pytest.mark.parametrize("step", ["forward", "loss", "convert", "swapped"])
def test_a_string_where_a_model_goes_is_one_line_naming_the_argument(tmp_path, step):
    x, y = first_batch()
    steps = portcheck.Handin(tmp_path / "log_reprod")
    call = {"forward": lambda: steps.forward(torch_net(), "paddle_model.pdparams", x),
            "loss": lambda: steps.loss(torch_net(), "paddle_model.pdparams", x, y, lambda a, b: a.sum()),
            "convert": lambda: steps.convert(torch_net(), "paddle_model.pdparams", x),
            "swapped": lambda: steps.forward(PaddleNet(), torch_net(), x)}[step]
    with pytest.raises(PipelineError) as e:
        call()
    said = str(e.value)
    assert "\n" not in said and said.endswith("[PC971]") and ("paddle_model is a str" in said or
                                                              "torch_model is a PaddleNet" in said), said
    assert not (tmp_path / "log_reprod").exists()  # nothing written


def _named(name: str):
    """A torch and a Paddle model whose second layer is named `name` (a ModuleDict's, a LayerDict's key)."""
    import collections
    t = torch.nn.Sequential(collections.OrderedDict([("fc", torch.nn.Linear(4, 4)), (name, torch.nn.Linear(4, 2))]))
    p = paddle.nn.Sequential(("fc", paddle.nn.Linear(4, 4)), (name, paddle.nn.Linear(4, 2)))
    return t, p


@pytest.mark.parametrize("name, char", [("blk:0", ":"), ("blk[0]", "["), ("blk#0", "#"), ("blk\u20280", "\\u2028")])
def test_a_module_name_the_key_notation_would_read_is_refused_naming_the_character(tmp_path, name, char):
    """blk:0 was reported as the model's own row ("(model)"), blk#0 refused as unpairable, blk<U+2028>0 lost: each is
    one line naming the module and the character, before anything is written."""
    import numpy as np
    t, p = _named(name)
    x = np.ones((2, 4), "float32")
    with pytest.raises(PipelineError) as e:
        portcheck.Handin(tmp_path / "log_reprod").forward(t, p, x)
    said = str(e.value)
    assert said.endswith("[PC972]") and f"holds '{char}'" in said and "\n" not in said and "\u2028" not in said, said
    assert not (tmp_path / "log_reprod").exists()


def test_a_long_or_unprintable_key_says_why_it_is_unreadable(tmp_path):
    import numpy as np
    from portcheck.core.fileio import MAX_KEY_LENGTH, load_npy
    for key, why in (("k" * 10000, f"a key of 10000 characters, over the {MAX_KEY_LENGTH} a key may have"),
                     ("k\u202e", "a key holding \\u202e, which is not printable")):
        np.save(tmp_path / "a.npy", {key: np.ones(3, "float32")}, allow_pickle=True)
        with pytest.raises(PipelineError) as e:
            load_npy(tmp_path / "a.npy")
        assert why in str(e.value) and str(e.value).endswith("[PC201]") and len(str(e.value)) < 400, str(e.value)


@pytest.mark.parametrize("name, char", [("blk\u20280", "\\u2028"), ("blk:0", ":")])
def test_runs_recorder_refuses_a_module_name_the_record_cannot_hold_naming_it(tmp_path, name, char):
    """`run`'s recorder stopped with "the Paddle script left no record" on a name holding U+2028: its side's one
    line names the module and the character."""
    import sys
    from portcheck.scripts import run
    script = tmp_path / "t.py"
    script.write_text(
        "import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        f"        self.add_module({name!r}, torch.nn.Linear(2, 2))\n\n    def forward(self, x):\n"
        f"        return self._modules[{name!r}](x)\n"
        "model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.1)\nx = torch.ones(4, 2)\n"
        "for _ in range(3):\n    loss = model(x).sum(); loss.backward(); opt.step(); opt.zero_grad()\n")
    run.prepare(tmp_path / "out")
    with pytest.raises(PipelineError) as e:
        run.run_side("torch", [sys.executable, str(script)], tmp_path / "out", 3)
    said = str(e.value)
    assert said.startswith("the torch script cannot be checked: module") and f"holds '{char}'" in said, said
    assert "[PC972]" in said and "\n" not in said and "\u2028" not in said


def _running(pid: int) -> bool:
    """Whether the process runs (a zombie waiting for its new parent to reap it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_compare_split_ends_what_its_ranks_started_before_it_returns(tmp_path, monkeypatch):
    """A build that starts a process of its own on each rank: compare_split green, and no process of it left."""
    import multiprocessing
    import time
    from portcheck.parallel import split
    import split_pairs as pairs
    from examples import tiny_llama_split as pair
    monkeypatch.setenv("HOSTILE84_PIDS", str(tmp_path))
    torch_model, state = pair.torch_and_state()
    report = split.compare_split(torch_model, pairs.forks_a_child, pair.IDS, 2, state=state)
    assert report.passed, report
    pids = [int((tmp_path / f"rank{r}.pid").read_text()) for r in range(2)]
    deadline = time.monotonic() + 5  # SIGKILL is sent before it returns; the kernel's end of them, a moment
    while any(map(_running, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _running(p)] and multiprocessing.active_children() == []



@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium): the page is "
                    "not opened in a browser here")
def test_a_page_of_hostile_names_in_a_real_browser(tmp_path):
    """Markup, a right-to-left override and a byte that was not UTF-8 in its names: the browser runs the page's own
    two scripts alone, makes no request, and shows the verdict and the first diverging module escaped."""
    name = f"blk\u202e.NEERG{HOSTILE}\udcff"
    row = {"name": name, "verdict": "RED", "max diff": 1.0}
    page.write({"title": "portcheck.Handin \u202eNEERG", "passed": False, "headline": "red", "first": {"torch": name},
                "verdicts": [{"name": name, "passed": False, "text": name}],
                "sections": [{"kind": "tree", "title": name, "rows": [row]}]}, tmp_path / "hostile.html")
    shown, requests = browse({"hostile": tmp_path / "hostile.html"}, tmp_path)
    s = shown["hostile"]
    assert s["verdict"] == "red" and not s["pwned"] and s["scripts"] == 2, s
    assert s["header"].startswith("first diverging: blk\\u202e.NEERG<b id=pwned>") and "\u202e" not in s["header"], s
    assert all(host(r) == "portcheck-probe.invalid" or host(r).endswith(BROWSER_OWN) for r in requests), requests
