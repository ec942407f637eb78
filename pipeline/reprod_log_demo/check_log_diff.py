"""The diff half: compare the two demo files; `misaligned` fails, so this exits 1 on purpose."""
import argparse
import sys

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2 import paths
from portcheck.core import diff, report
from portcheck.core.errors import run_main


def main():
    argparse.ArgumentParser(description=__doc__, allow_abbrev=False).parse_args()
    d = paths.work() / "pipeline" / "reprod_log_demo"
    write = "python pipeline/reprod_log_demo/write_log.py"
    torch_data, paddle_data = diff.load_pair(d / "demo_torch.npy", d / "demo_paddle.npy",
                                             how={"torch": write, "paddle": write})
    result = diff.compare(torch_data, paddle_data, default=1e-6, name="demo")
    report.write(result, d / "demo_diff.log")  # a demo, not evidence: kept out of log_reprod/
    sys.exit(0 if result.passed else 1)


if __name__ == "__main__":
    run_main(main)
