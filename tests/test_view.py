"""A comparison's page (portcheck.core.page, portcheck.view): one file that opens offline, fetches nothing, shows
the verdict and the module tree with the first diverging module marked, escapes every name; a hand-in's page made
by `check --html` from the folder alone, a forged page in the folder never read; and all of it in a real
headless Chromium, where the page on each planted pair marks report.first_diverging, visible and red.

The browser: Debian's chromium, driven with --dump-dom (no Python dependency): one start for every page, each in
an iframe of a probe page that reads what the browser shows (visibility, the computed colour) into the DOM it
dumps. Every request leaves through a proxy this test holds: it sees the probe's own planted request (it can see
one) and no other but the browser's own services' (which a blank page asks for too).
"""
import collections
import html
import importlib.util
import json
import re
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from portcheck import compare_backward, compare_forward, convert, record_forward
from portcheck.core import page, record
from portcheck.core.errors import PipelineError

HOSTILE = "<b id=pwned>x</b><script>alert(1)</script>"  # a module name is its author's text
X = np.random.RandomState(0).randn(4, 8).astype("float32")
PLANTS = ("clean", "epsilon", "activation", "transposed")
CHROMIUM = shutil.which("chromium")


def models(plant: str):
    import paddle
    import torch
    torch.manual_seed(0)

    def t_block():
        return torch.nn.Sequential(collections.OrderedDict(fc=torch.nn.Linear(8, 8), ln=torch.nn.LayerNorm(8),
                                                           act=torch.nn.GELU()))

    def p_block(i):
        eps = 1e-3 if plant == "epsilon" and i == 1 else 1e-5
        act = paddle.nn.GELU(approximate=plant == "activation" and i == 1)
        return paddle.nn.Sequential(("fc", paddle.nn.Linear(8, 8)), ("ln", paddle.nn.LayerNorm(8, epsilon=eps)),
                                    ("act", act))
    t = torch.nn.Sequential(collections.OrderedDict(body=torch.nn.Sequential(t_block(), t_block()),
                                                    **{HOSTILE: torch.nn.Linear(8, 3)}))
    p = paddle.nn.Sequential(("body", paddle.nn.Sequential(p_block(0), p_block(1))), ("head", paddle.nn.Linear(8, 3)))
    convert(t, p, inputs=X)
    if plant == "transposed":  # a converter that skipped one square Linear: left in torch's layout
        w = p.body[0].fc.weight
        w.set_value(paddle.transpose(w, [1, 0]))
    return t.eval(), p.eval()


@pytest.fixture(scope="module")
def reports():
    return {plant: compare_forward(*models(plant), X, isolate=True) for plant in PLANTS}


EXPECTED = {"clean": None, "epsilon": "body.1.ln", "activation": "body.1.act", "transposed": "body.0.fc"}


def test_the_page_marks_where_the_runs_part_and_escapes_every_name(reports, tmp_path):
    for plant, report in reports.items():
        assert report.first_diverging == EXPECTED[plant] and report.passed == (plant == "clean"), plant
        text = page.page(report.view())
        assert report._repr_html_() == page.framed(text) and 'sandbox="allow-scripts"' in page.framed(text)
        assert text.count("<script") == 2 and "<b id=pwned>" not in text  # its data and its own script only
        assert "&lt;b id=pwned&gt;x&lt;/b&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in text
        assert f'content="{page.CSP}"' in text and "default-src 'none'" in page.CSP
        assert "http://" not in text and "https://" not in text  # nothing to fetch, no link out
        data = json.loads(text.split('id="portcheck-data">', 1)[1].split("</script>", 1)[0])
        assert data["passed"] == report.passed and (data["first"] or {}).get("torch") == report.first_diverging
        marked = text.count('id="first-diverging"')
        assert marked == (plant != "clean"), plant
        if marked:
            assert f'id="first-diverging" data-module="{report.first_diverging}"' in text
            assert f'first diverging: <bdi>{report.first_diverging}</bdi>' in text  # in the page's header
    said = reports["epsilon"].html(tmp_path / "p.html")
    assert said.startswith(f"page: {tmp_path / 'p.html'}") and page.ours(tmp_path / "p.html")


def test_a_backward_page_names_where_the_runs_part_and_lists_each_parameter_worst_first():
    import paddle
    import torch
    t, p = models("transposed")
    report = compare_backward(t.train(), p.train(), X, np.array([0, 2, 1, 0]),
                              loss=(torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy),
                              optimizer=(lambda ps: torch.optim.SGD(ps, lr=0.1),
                                         lambda ps: paddle.optimizer.SGD(learning_rate=0.1, parameters=ps)), steps=2)
    text = page.page(report.view())
    assert report.first_diverging == "body.0.fc" and not report.passed
    assert f'id="first-diverging" data-module="{report.first_diverging}"' in text
    grads = text.split("gradients after the first backward", 1)[1].split("</table>", 1)[0]
    named = [html.unescape(g.split('"', 1)[0]) for g in grads.split('data-module="')[1:]]
    assert sorted(named) == sorted(r.name for r in report.grads) and len(named) == len(report.grads)
    shares = [r.used for r in sorted(report.grads, key=lambda r: named.index(r.name))]
    assert shares == sorted(shares, reverse=True)  # worst first
    assert "after step 2: loss, lr and weights" in text


def test_a_page_is_never_written_over_a_file_it_did_not_write_or_through_a_link(reports, tmp_path):
    mine = tmp_path / "mine.html"
    mine.write_text("<html>my own notes</html>")
    with pytest.raises(PipelineError, match=r"not a page portcheck wrote .*\[PC191\]"):
        reports["clean"].html(mine)
    assert mine.read_text() == "<html>my own notes</html>"
    link = tmp_path / "link.html"
    link.symlink_to(tmp_path / "elsewhere.html")
    with pytest.raises(PipelineError):
        reports["clean"].html(link)
    assert not (tmp_path / "elsewhere.html").exists()
    reports["clean"].html(tmp_path / "again.html")
    reports["epsilon"].html(tmp_path / "again.html")  # its own page: replaced
    assert 'id="first-diverging"' in (tmp_path / "again.html").read_text()


def hand_in(tmp, t, p, report):
    from portcheck.pipeline.handin import hand_in, judge_and_log, model_output, save_side
    for side, model in (("torch", t), ("paddle", p)):
        rec = record_forward(model, X)
        exact = {"logits": model_output(rec, exact=True)} if side == "torch" else None
        save_side(tmp, "forward", side, {"logits": model_output(rec)}, {"inputs": record.fingerprint([("x", X)])},
                  f"{side}.py", exact=exact)
    verdict = judge_and_log(tmp, "forward")
    hand_in(tmp, "forward", tmp / "log_reprod", comparison=report)
    return tmp / "log_reprod", verdict


def check_html(folder, out, capsys):
    from portcheck import cli
    args = cli.parser().parse_args(["check", str(folder), "--only", "forward", "--html", str(out)])
    code = cli.run_check(args.folder, args)
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def handins(reports, tmp_path_factory):
    """A green hand-in and a red one (the transposed weight), each with the writer's page: (its folder, judge_and_log's
    verdict)."""
    return {plant: hand_in(tmp_path_factory.mktemp(plant), *models(plant), reports[plant])
            for plant in ("clean", "transposed")}


@pytest.fixture(scope="module")
def folders(handins):
    return {plant: folder for plant, (folder, _) in handins.items()}


FORGED = "<!-- written by portcheck: a comparison's page -->FORGED green, trust me"


def test_check_html_is_checks_verdict_and_a_forged_page_changes_nothing(folders, tmp_path, capsys):
    for plant, folder in folders.items():
        assert page.ours(folder / "diagnostics" / page.NAME)  # the writer's page, beside the pictures
        code, said = check_html(folder, tmp_path / f"{plant}.html", capsys)
        assert code == (plant != "clean"), said
        text = (tmp_path / f"{plant}.html").read_text()
        assert f'data-verdict="{"green" if code == 0 else "red"}"' in text and "forward: " in text
        codes = re.findall(r"\[PC(\d{3})\]", said)  # each code linked to its entry, never fetched
        assert all(f'messages.md#pc{c}">[PC{c}]</a>' in text for c in codes) and bool(codes) == bool(code), said
        (folder / page.NAME).write_text(FORGED)  # a contestant's page beside the pairs: no page of the folder's
        forged, said_forged = check_html(folder, tmp_path / f"{plant}_forged.html", capsys)
        assert forged == code and said_forged.splitlines()[:-2] == said.splitlines()[:-2]
        assert "FORGED" not in (tmp_path / f"{plant}_forged.html").read_text()
        writers = (folder / "diagnostics" / page.NAME).read_text()
        (folder / "diagnostics" / page.NAME).write_text(FORGED)  # in the writers' place: the folder is red by it
        forged, said_forged = check_html(folder, tmp_path / f"{plant}_forged.html", capsys)
        flagged = [line for line in said_forged.splitlines() if "[PC970]" in line]
        assert forged == 1 and len(flagged) == 1 and "not a page portcheck wrote" in flagged[0], said_forged
        assert "FORGED" not in (tmp_path / f"{plant}_forged.html").read_text()
        (folder / "diagnostics" / page.NAME).write_text(writers)


def test_a_forged_or_linked_page_in_the_folder_is_never_trusted_or_written_through(folders, tmp_path, capsys,
                                                                                     monkeypatch):
    """A contestant's page in the hand-in, at the very path the reviewer gives `check --html`: a link there is
    refused before anything is judged, its target untouched; a page carrying the project's mark is made anew in its
    place (replaced, never written through: its other hard link keeps the forger's text); `view` without --html
    never writes into the folder, and its page is check's own."""
    import shutil
    from portcheck import cli
    folder = tmp_path / "theirs"
    shutil.copytree(folders["transposed"], folder, symlinks=True)
    there, elsewhere = folder / "diagnostics" / page.NAME, tmp_path / "elsewhere.html"
    elsewhere.write_text(FORGED)
    there.unlink()
    there.symlink_to(elsewhere)
    with pytest.raises(PipelineError, match=r"symbolic link.*\[PC206\]"):
        check_html(folder, there, capsys)
    assert elsewhere.read_text() == FORGED and there.is_symlink()
    there.unlink()
    there.hardlink_to(elsewhere)
    code, said = check_html(folder, there, capsys)
    assert code == 1 and "FORGED" not in there.read_text() and 'data-verdict="red"' in there.read_text()
    assert elsewhere.read_text() == FORGED
    there.write_text(FORGED)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(SystemExit) as e:
        cli.main(["view", str(folder), "--only", "forward", "--no-browser"])
    made = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert e.value.code == 1 and folder not in made.parents and there.read_text() == FORGED
    assert 'data-verdict="red"' in made.read_text() and "FORGED" not in made.read_text()
    shutil.rmtree(made.parent)


def test_a_pairs_verdict_shows_its_rules_and_keys(handins):
    """judge_and_log's verdict (handin.MeasuredVerdict) as a page: the guide's, measured and strict rules' lines
    and the run's, each key by the measured rule and the guide's."""
    for plant, (_, verdict) in handins.items():
        text = page.page(verdict.view())
        assert f'data-verdict="{"green" if verdict.passed else "red"}"' in text and verdict.passed == (plant == "clean")
        assert all(f"{word} {'green' if ok else 'RED'}" in text for word, ok in (
            ("guide", verdict.guide.passed), ("measured", verdict.measured_passed), ("strict", verdict.strict.passed)))
        assert 'data-module="logits"' in text and "each key by measured rule" in text


def test_view_prints_the_path_and_says_when_there_is_no_display(folders, tmp_path, capsys, monkeypatch):
    from portcheck import cli
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    for flags, said in ((["--no-browser"], lambda out, p: out.endswith(f"\n{p}")),
                        ([], lambda out, p: out.endswith(f"no display here to open a browser on: open {p} on a "
                                                         "machine with one"))):
        out = tmp_path / f"view{len(flags)}.html"
        with pytest.raises(SystemExit) as e:
            cli.main(["view", str(folders["clean"]), "--only", "forward", "--html", str(out), *flags])
        assert e.value.code == 0 and said(capsys.readouterr().out.strip(), out) and page.ours(out)


def test_view_of_runs_output_judges_the_pairs_run_hands_in(tmp_path, capsys, monkeypatch):
    """`view DIR` on `portcheck run`'s output: its hand-in asked for what run makes (else a green run's page is red
    for metric and train_align, pairs run never writes); a bare DIR/log_reprod/ (no run's digests: a contestant's
    folder) and an --only of the user's own are left as given."""
    from portcheck import cli
    from portcheck.scripts import folders
    asked = []
    monkeypatch.setattr(cli, "run_check", lambda folder, args: asked.append((folder, args.only)) or 0)
    out = tmp_path / "run_out"
    (out / "log_reprod").mkdir(parents=True)
    for flags in ([], ["--only", "forward"]):
        with pytest.raises(SystemExit):
            cli.main(["view", str(out), "--no-browser", "--html", str(tmp_path / "p.html"), *flags])
    (out / folders.DIGESTS).write_text("")
    with pytest.raises(SystemExit):
        cli.main(["view", str(out), "--no-browser", "--html", str(tmp_path / "p.html")])
    (out / "log_reprod" / "train_align_torch.npy").write_bytes(b"")
    with pytest.raises(SystemExit):
        cli.main(["view", str(out), "--no-browser", "--html", str(tmp_path / "p.html")])
    first = ",".join(("config", *folders.PAIRS))
    assert asked == [(out / "log_reprod", None), (out / "log_reprod", "forward"), (out / "log_reprod", first),
                     (out / "log_reprod", first + ",train_align")], asked
    assert f"--only {first} (--only PAIR,... asks for other pairs)" in capsys.readouterr().out

# ---------------------------------------------------------------- in a real browser

PROBE = """<!DOCTYPE html><html><body><pre id="out">not run</pre>
<img src="http://portcheck-probe.invalid/control.png" alt="">
%s
<script>
window.addEventListener('load', function () {
  var out = {};
  document.querySelectorAll('iframe').forEach(function (f) {
    var d = f.contentDocument, el = d.getElementById('first-diverging');
    out[f.getAttribute('data-name')] = {
      verdict: d.querySelector('header').getAttribute('data-verdict'),
      red_rows: [].filter.call(d.querySelectorAll('.row.red, tr.red'),
                               function (r) { return r.checkVisibility(); }).length,
      first: el && el.getAttribute('data-module'), visible: !!el && el.checkVisibility(),
      red: !!el && el.classList.contains('red'), colour: el && getComputedStyle(el).backgroundColor,
      header: (d.getElementById('header-module') || {}).textContent || null,
      pwned: d.getElementById('pwned') !== null, scripts: d.scripts.length};
    var q = d.getElementById('search'), w = f.contentWindow;  // then searched by name, and sorted by ratio
    q.value = 'ln';
    q.dispatchEvent(new w.Event('input'));
    out[f.getAttribute('data-name')].found = [].filter.call(d.querySelectorAll('.tree .row[data-module]'),
      function (r) { return r.checkVisibility(); }).map(function (r) { return r.getAttribute('data-module'); });
    q.value = '';
    q.dispatchEvent(new w.Event('input'));
    d.getElementById('sort-ratio').click();
    out[f.getAttribute('data-name')].sorted = [].map.call(d.querySelectorAll('.tree.flat .row'),
      function (r) { return parseFloat(r.getAttribute('data-used')); });
  });
  document.getElementById('out').textContent = JSON.stringify(out);
});
</script></body></html>"""


class Proxy:
    """Every request the browser makes, received here (its --proxy-server) and answered 404."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port, self.requests = self.sock.getsockname()[1], []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self.requests.append(conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1"))
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass


# the browser's own services (its clock, updates, sign-in), asked for by a blank page too; a page names no host
# (asserted below), so none of its requests can be among them
BROWSER_OWN = (".google.com", ".googleapis.com", ".gvt1.com", ".gstatic.com")


def host(request: str) -> str:
    """The host of a request line a proxy receives: "GET http://host/path HTTP/1.1", "CONNECT host:443 HTTP/1.1"."""
    target = request.split(" ")[1] if " " in request else request
    return target.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]


def browse(pages: dict, tmp_path) -> tuple:
    """({page name: what the browser shows of it}, [every request that left]) from one headless Chromium."""
    frames = "".join(f'<iframe data-name="{name}" src="{path.resolve().as_uri()}" width="1200" height="900">'
                      "</iframe>" for name, path in pages.items())
    probe = tmp_path / "probe.html"
    probe.write_text(PROBE % frames)
    proxy = Proxy()
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--allow-file-access-from-files",
         f"--user-data-dir={tmp_path / 'profile'}", f"--proxy-server=http://127.0.0.1:{proxy.port}",
         "--proxy-bypass-list=<-loopback>", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120)
    proxy.sock.close()
    dom = proc.stdout
    shown = dom.split('<pre id="out">', 1)[1].split("</pre>", 1)[0] if '<pre id="out">' in dom else "not run"
    assert shown != "not run", proc.stderr[-2000:]
    return json.loads(html.unescape(shown)), proxy.requests


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium): the pages "
                    "are not opened in a browser here")
def test_in_a_real_browser(reports, folders, tmp_path, capsys):
    pages = {}
    for plant, report in reports.items():
        report.html(tmp_path / f"{plant}.html")
        pages[plant] = tmp_path / f"{plant}.html"
    codes = {}
    for plant, folder in folders.items():
        codes[plant], _ = check_html(folder, tmp_path / f"handin_{plant}.html", capsys)
        pages[f"handin_{plant}"] = tmp_path / f"handin_{plant}.html"
    assert not any("://" in path.read_text() for path in pages.values())  # no page names a host it could ask
    shown, requests = browse(pages, tmp_path)
    hosts = [host(r) for r in requests]
    assert "portcheck-probe.invalid" in hosts, requests  # the probe's own request is seen: a page's would be
    assert all(h == "portcheck-probe.invalid" or h.endswith(BROWSER_OWN) for h in hosts), requests  # and none is
    assert shown["clean"]["verdict"] == "green" and shown["clean"]["red_rows"] == 0 and shown["clean"]["first"] is None
    for plant in PLANTS[1:]:
        s = shown[plant]
        assert s["verdict"] == "red" and s["first"] == reports[plant].first_diverging, (plant, s)
        assert s["visible"] and s["red"] and s["colour"] == "rgb(248, 196, 196)", (plant, s)
        assert s["header"].startswith(f"first diverging: {reports[plant].first_diverging}"), s
    found, ranked = shown["epsilon"]["found"], [x for x in shown["epsilon"]["sorted"] if x == x]
    assert found == ["body.0.ln", "body.1.ln"], found  # the search shows the modules named so, and no other
    assert len(ranked) == len(reports["epsilon"].paired) and ranked == sorted(ranked, reverse=True), ranked
    for plant, code in codes.items():
        assert shown[f"handin_{plant}"]["verdict"] == ("green" if code == 0 else "red"), (plant, shown)
    assert not any(s["pwned"] for s in shown.values()) and all(s["scripts"] == 2 for s in shown.values()), shown


def test_the_readmes_picture_is_the_tools_photograph():
    """docs/img/planted_page.png is tools/page_planted.py's photograph of its page: a PNG of the window it sets."""
    import struct
    from bert_sst2 import paths
    spec = importlib.util.spec_from_file_location("page_planted", paths.ROOT / "tools" / "page_planted.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    head = (paths.ROOT / "docs" / "img" / "planted_page.png").read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == tool.SIZE

