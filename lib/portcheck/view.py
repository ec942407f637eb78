"""A hand-in as a page: what `python -m portcheck check` derives from the folder, formatted by portcheck.core.page.

    python -m portcheck check log_reprod --html check.html   # the verdicts, and the page of them
    python -m portcheck view log_reprod                      # the page, opened in your browser
    python -m portcheck view DIR --no-browser                # its path only (`run`'s DIR: its log_reprod/)
    python -m portcheck view GRAPHS --graph                  # report.graphs(GRAPHS)'s two graphs in Model Explorer

The page is always made anew from the folder's pairs, as `check` judges them: a page found in the folder (a
contestant's report.html) is never read, trusted or shown.
"""
import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import threading
import urllib.request
import webbrowser
from pathlib import Path
from urllib.parse import quote

from portcheck.core import page, report
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import is_regular

PAGE = page.NAME


class _Tee(io.TextIOBase):
    """stdout as it is, and each line kept: a pair's printed lines shown on its page as they were said."""

    def __init__(self, out):
        self.out, self.kept = out, []

    def write(self, text):
        self.out.write(text)
        self.kept.append(text)
        return len(text)

    def flush(self):
        self.out.flush()


@contextlib.contextmanager
def said(lines: list):
    """Lines printed inside the block, still printed, appended to `lines`."""
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield
    lines += "".join(tee.kept).splitlines()


def curves(below) -> list:
    """The training curves a hand-in holds (diagnostics/train_log_*.npy, each bound to its run record), both
    sides: loss and lr per step, each metric per evaluation; [] where it holds none or they cannot be read
    (`check` says why on train_align's line)."""
    from portcheck.pipeline import training_log
    if below is None or not all((Path(below) / f"{training_log.LOG}_{s}.npy").is_file() for s in ("torch", "paddle")):
        return []
    try:
        t, p, _ = training_log.logs(below)
    except PipelineError:
        return []
    return training_log.curves_of(t, p)


def folder_view(folder, red: int, pairs: list, rest: list, rows: list, last: str) -> dict:
    """The page's data of a hand-in as `check` judged it: red, its count of red pairs (check's return); pairs,
    [(pair, whether red, the lines check printed for it)]; rest, check's other lines; rows, every key's figures
    (report.figures, as `--csv` writes them); last, check's final line."""
    from portcheck.pipeline import handin
    sections = []
    for name, _, _ in pairs:
        keys = [r for r in rows if r["part"] == name]
        if keys:
            sections.append({"kind": "table", "title": f"{name}: every key, worst first", "rows": keys})
    drawn = curves(handin.ours(folder))
    if drawn:
        sections.append({"kind": "curves", "title": "training: both sides and their difference", "curves": drawn})
    verdicts = [{"name": name, "passed": not is_red, "text": "\n".join(lines)} for name, is_red, lines in pairs]
    verdicts += [{"name": "the folder", "passed": None, "text": "\n".join(rest)}] if rest else []
    return {"title": f"python -m portcheck check {Path(folder).name}", "passed": not red, "headline": last,
            "first": None, "verdicts": verdicts, "sections": sections}


def hand_in_folder(folder: Path) -> Path:
    """`folder`, or its log_reprod/ where it is `portcheck run`'s output folder."""
    folder = Path(folder).expanduser()
    return folder / "log_reprod" if not any(folder.glob("*_torch*.npy")) and (folder / "log_reprod").is_dir() \
        else folder


def run_pairs(out: Path):
    """The pairs `portcheck run` hands in, as --only names them, where `out` is its output folder (its digests
    beside log_reprod/): the first steps' (the configuration and scripts.folders.PAIRS), and train_align where --full
    handed it in; else None. Without them a green run's page would be red for the guide's pairs run never makes."""
    from portcheck.pipeline import training
    from portcheck.scripts import folders, runconfig
    if not (out / folders.DIGESTS).is_file():
        return None
    full = (out / "log_reprod" / f"{training.PAIR}_torch.npy").is_file()
    return ",".join((runconfig.CONFIG, *folders.PAIRS, *((training.PAIR,) if full else ())))


def has_display() -> bool:
    """Whether a browser can show a window here: on Linux and the BSDs, an X or Wayland display."""
    if sys.platform.startswith(("linux", "freebsd", "openbsd")):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


# Model Explorer (ai-edge-model-explorer), the graphs' viewer, optional: pinned as tested in requirements-view.txt,
# the library's extra `view` (lib/pyproject.toml) the same pins; portcheck is installed from its checkout, not PyPI
EXTRA = "pip install -r requirements-view.txt"
EXTRA_LIB = 'pip install "./lib[view]"'
HOST = "127.0.0.1"


def explorer_installed() -> bool:
    """Whether Model Explorer can be imported here."""
    try:
        return importlib.util.find_spec("model_explorer") is not None
    except (ImportError, ValueError):  # a broken install, or imports of it refused
        return False


def need_explorer():
    """One line where Model Explorer cannot be imported here: how to install it."""
    if not explorer_installed():
        raise PipelineError(f"Model Explorer is not installed: in portcheck's checkout, {EXTRA} (or {EXTRA_LIB}, "
                            "the library's optional extra; nothing else needs it) [PC193]")


def graph_url(folder, port: int) -> str:
    """The address opening report.graphs(folder)'s two graphs in Model Explorer's split view, torch's on the left,
    each side's ratio to the allowance as its node data, a node's pair selected with it ("match node id": a pair
    has one id on both sides)."""
    from portcheck.forward import graph
    folder = Path(folder).resolve()
    models = [{"url": str(folder / graph.FILES[side])} for side in graph.SIDES]
    # each side's node data targets its graph by the label its file gives it (its collection's); the last, shown
    data = [(str(folder / graph.DATA[side, how]), side) for how in ("isolated", "cumulative") for side in graph.SIDES]
    pane = {"deepestExpandedGroupNodeIds": [], "selectedNodeId": "", "selectedCollectionLabel": "",
            "flattenLayers": False}
    state = {"models": models, "nodeData": [d for d, _ in data], "nodeDataTargets": [t for _, t in data],
             "uiState": {"paneStates": [{**pane, "selectedGraphId": side, "widthFraction": 0.5, "selected": i == 0}
                                        for i, side in enumerate(graph.SIDES)]},
             "sync": {"mode": "match_node_id"}}
    return f"http://{HOST}:{port}/?data={quote(json.dumps(state))}&renderer=webgl"


def graphs_folder(folder: Path) -> Path:
    """`folder` where it holds the graphs report.graphs wrote (its mark and each file, each a file of its own, not
    a link), else one line."""
    from portcheck.forward import graph
    names = [graph.MARK, *graph.FILES.values(), *graph.DATA.values()]
    if not all(is_regular(folder, n) for n in names):  # a link by one of their names is none of them
        raise PipelineError(f"{folder} holds no graphs portcheck wrote: write them from a forward comparison with "
                            "report.graphs(FOLDER) (a hand-in holds the models' outputs, not their modules), then "
                            "python -m portcheck view FOLDER --graph [PC194]")
    return folder


def serve_graphs(folder, port: int = 8080, open_browser: bool = True):
    """Model Explorer on 127.0.0.1 showing report.graphs(folder)'s two graphs side by side, until Ctrl-C. Without
    Model Explorer, one line saying how to install it. Its check for a newer version (a request to the network)
    is not made."""
    need_explorer()
    from portcheck.forward import graph
    folder = graphs_folder(Path(folder))
    from model_explorer import config as me_config, server
    # offline: its check for a newer version (a request to PyPI) answers "none", and nothing leaves the machine
    server._check_new_version = lambda *args, **kwargs: {"version": "", "runningVersion": "", "releaseUrl": "",
                                                         "desktopAppUrl": ""}
    config = me_config()
    for side in graph.SIDES:
        config.add_model_from_path(str(folder / graph.FILES[side]))
    if not 0 < port < 65536 or server._is_port_in_use(HOST, port):
        raise PipelineError(f"--port {port}: {'in use' if 0 < port < 65536 else 'no port'} here: give a free "
                            "port [PC195]")
    stop = threading.Event()
    threading.Thread(target=_announce, args=(graph_url(folder, port), port, open_browser, stop), daemon=True).start()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its own lines name an address without the split view
            server.start(host=HOST, port=port, config=config, no_open_in_browser=True)
    finally:
        stop.set()


def _announce(url: str, port: int, open_browser: bool, stop):
    """Once Model Explorer answers on `port`: its address with the split view, printed (and opened in a browser
    where one can show)."""
    while not stop.wait(0.3):
        try:
            urllib.request.urlopen(f"http://{HOST}:{port}/check_health", timeout=2).close()
        except OSError:
            continue
        print(report.one_line(f"Model Explorer, the two graphs side by side: {url} (Ctrl-C stops it)"),
              file=sys.__stdout__, flush=True)
        if open_browser and has_display():
            webbrowser.open(url)
        return


def show_graphs(forward_report, folder=None, port: int = 8080, open_browser: bool = True):
    """A ForwardReport's two graphs (report.graphs) in Model Explorer (serve_graphs): written into `folder`, or a
    new temporary one; blocks until Ctrl-C."""
    need_explorer()
    folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="portcheck-graphs-"))
    forward_report.graphs(folder)
    serve_graphs(folder, port, open_browser)


def add_parser(sub, add_check_flags):
    v = sub.add_parser("view", help="a hand-in as one page, opened in your browser", allow_abbrev=False)
    v.add_argument("folder", type=Path, help="a hand-in folder (log_reprod/), or `portcheck run`'s output folder")
    add_check_flags(v)
    v.add_argument("--no-browser", action="store_true", help="write the page and print its path only")
    v.add_argument("--graph", action="store_true", help="FOLDER holds report.graphs(FOLDER): both models' graphs "
                   f"side by side in Model Explorer, on {HOST} (needs {EXTRA})")
    v.add_argument("--port", type=int, default=8080, help="--graph: Model Explorer's port (default 8080)")
    return v


def main(args, run_check) -> int:
    """`view`: the page of check's verdicts, written to --html or a new temporary folder, then opened; --graph:
    the two graphs in Model Explorer."""
    if args.graph:
        serve_graphs(args.folder.expanduser(), args.port, not args.no_browser)
        return 0
    given = args.folder.expanduser()
    args.folder, made = hand_in_folder(given), None
    if args.only is None and args.folder != given and run_pairs(given):  # `run`'s output: its own hand-in
        args.only = run_pairs(given)
        print(report.one_line(f"{given} is `portcheck run`'s output: its hand-in judged as run made it, --only "
                              f"{args.only} (--only PAIR,... asks for other pairs)"))
    if args.html is None:  # never into the folder judged: it may be a contestant's
        made = Path(tempfile.mkdtemp(prefix="portcheck-view-"))
        args.html = made / PAGE
    try:
        code = run_check(args.folder, args)
    except BaseException:  # a refusal, Ctrl-C: the empty folder made for the page goes too
        if made is not None and not any(made.iterdir()):
            made.rmdir()
        raise
    uri = args.html.resolve().as_uri()
    if args.no_browser:
        print(args.html)
    elif not has_display():
        print(report.one_line(f"no display here to open a browser on: open {args.html} on a machine with one"))
    elif not webbrowser.open(uri):
        print(report.one_line(f"no browser could be started here: open {args.html} in one"))
    else:
        print(report.one_line(f"opened {uri} in your browser"))
    return code
