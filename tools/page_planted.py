"""Draw the picture the README shows of a comparison's page: tools/plot_planted.py's planted pair (one BatchNorm's
epsilon 1e-3 on Paddle's side instead of torch's 1e-5), compared with compare_forward(isolate=True), written by
ForwardReport.html and photographed by a headless Chromium (`apt-get install -y chromium`).

    python tools/page_planted.py                 # writes docs/img/planted_page.png
    python tools/page_planted.py --out x.png     # elsewhere
"""
import argparse
import importlib.util
import shutil
import subprocess
import tempfile
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, before torch and Paddle load)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np

from portcheck import compare_forward, convert
from portcheck.core.errors import PipelineError, run_main

ROOT = Path(__file__).resolve().parents[1]
SIZE = (1200, 1150)  # the browser window photographed, in pixels


def planted_pair():
    spec = importlib.util.spec_from_file_location("plot_planted", ROOT / "tools" / "plot_planted.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.models(1)


def photograph(page: Path, out: Path, chromium: str):
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               "--disable-background-networking", "--disable-component-update", "--no-first-run",
                               f"--user-data-dir={profile}", f"--window-size={SIZE[0]},{SIZE[1]}",
                               f"--screenshot={out}", page.resolve().as_uri()], capture_output=True, text=True,
                              timeout=120)
    if proc.returncode or not out.is_file():
        raise PipelineError(f"chromium could not photograph the page (exit {proc.returncode}): "
                            f"{proc.stderr.strip().splitlines()[-1:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "planted_page.png", help="the PNG to write")
    out = ap.parse_args().out
    if out.suffix != ".png":
        raise PipelineError(f"--out {out}: give a .png path")
    chromium = shutil.which("chromium")
    if chromium is None:
        raise PipelineError("chromium is not installed: apt-get install -y chromium")
    t, p = planted_pair()
    x = np.random.RandomState(0).randn(2, 3, 16, 16).astype("float32")
    convert(t, p, inputs=x)
    t.eval(), p.eval()
    report = compare_forward(t, p, x, isolate=True)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "planted.html"
        print(report.html(page).replace(str(page), page.name))
        photograph(page, out, chromium)
    print(f"first diverging: {report.first_diverging}; picture: {out.name}")
    return 0


if __name__ == "__main__":
    run_main(main)
