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
    assert n >= 2 and len(lines) == 1 and "says GREEN where the folder is RED" in lines[0], out
    # a page of another run of the folder (its manifest's seal) is not the folder's page either
    data = json.loads(re.search(r'id="portcheck-data">(.*?)</script>', text).group(1))
    where.write_text(text.replace(data["run"], "0" * 64), encoding="utf-8")
    out = checked(top, capsys)[1]
    assert "describes another run of the folder" in out and "PC970" in out
    # the writers' own next hand-in drops it and writes the folder's page again
    where.write_text(forged, encoding="utf-8")
    portcheck.Handin(top).forward(torch_net(), GeluTanh(), x)
    assert "PC970" not in checked(top, capsys)[1]
