"""Draw the picture the README shows of the two graphs side by side in Google's Model Explorer: tools/plot_planted.py's
planted pair (one BatchNorm's epsilon 1e-3 on Paddle's side instead of torch's 1e-5; torch's modules named, Paddle's
numbered), compared with compare_forward(isolate=True), its graphs written by ForwardReport.graphs, shown by
`python -m portcheck view DIR --graph` and photographed by a headless Chromium (tools/headless.py). Needs Model
Explorer (pip install -r requirements-view.txt) and chromium (apt-get install -y chromium).

    python tools/explorer_split.py                 # writes docs/img/explorer_split.png
    python tools/explorer_split.py --out x.png     # elsewhere
"""
import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, before torch and Paddle load)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from portcheck import compare_forward, convert, view
from portcheck.core.errors import PipelineError, run_main

ROOT = Path(__file__).resolve().parents[1]
SIZE = (1600, 800)  # the browser window photographed, in pixels
TABLES = "[...document.querySelectorAll('table')].filter(t => t.innerText.includes('ratio to')).length"


def tool(name: str):
    """tools/<name>.py, imported by its path (tools/ is no package on sys.path)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def planted_pair():
    return tool("plot_planted").models(1)


def photograph(folder: Path, out: Path):
    headless = tool("headless")
    Browser, free_port = headless.Browser, headless.free_port
    if headless.CHROMIUM is None:
        raise PipelineError("chromium is not installed: apt-get install -y chromium")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "portcheck", "view", str(folder), "--graph", "--port", str(port),
                               "--no-browser"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        said = server.stdout.readline()
        if "side by side: " not in said:
            raise PipelineError(f"Model Explorer did not start: {said.strip()}")
        url = said.split("side by side: ", 1)[1].split(" ")[0]
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/check_health", timeout=2).close()
                break
            except OSError:
                time.sleep(0.5)
        with Browser(SIZE) as b:
            b.open(url)
            if not b.wait(f"{TABLES} >= 4", 90):
                raise PipelineError("Model Explorer showed no node data in 90 s")
            time.sleep(2)  # the canvases' last frame
            b.shot(out)
    finally:
        server.terminate()
        server.wait(10)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "explorer_split.png", help="the PNG to write")
    out = ap.parse_args().out
    if out.suffix != ".png":
        raise PipelineError(f"--out {out}: give a .png path")
    view.need_explorer()
    t, p = planted_pair()
    x = np.random.RandomState(0).randn(2, 3, 16, 16).astype("float32")
    convert(t, p, inputs=x)
    t.eval(), p.eval()
    report = compare_forward(t, p, x, isolate=True)
    with tempfile.TemporaryDirectory() as tmp:
        report.graphs(tmp)
        photograph(Path(tmp), out.resolve())
    print(f"first diverging: {report.first_diverging}; picture: {out.name}")
    return 0


if __name__ == "__main__":
    run_main(main)
