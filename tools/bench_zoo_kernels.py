"""The zoo under torch's scalar kernels (docs/bench/zoo_kernels.md): a run of the whole zoo (tools/zoo, docs/zoo.md)
with `ATEN_CPU_CAPABILITY=default`, as another CPU's torch rounds, and the correct ports that differ there, each
with how the library judges it. The run is the zoo's own command (minutes of every core); its figures are kept in
docs/bench/zoo_kernels.json with the command, date, CPU and load it was recorded with (null: not recorded), and
this tool writes the page from that JSON alone.

    python tools/bench_zoo_kernels.py --page     # docs/bench/zoo_kernels.md again from zoo_kernels.json
"""
import argparse
import json
from pathlib import Path

from portcheck.core.errors import PipelineError, require, run_main
from tools import bench_doc

COMMAND = "ATEN_CPU_CAPABILITY=default python -m tools.zoo.run"
AGAIN = "the zoo's run records none of them: enter them in zoo_kernels.json beside its figures"


def render(result: dict) -> str:
    """The page, from the JSON beside it alone."""
    same = result["differing from the table"] == 0
    lines = ["# The zoo under another CPU's kernels", "",
             bench_doc.header(result.get(bench_doc.RUN), COMMAND, AGAIN), "",
             "A run of the whole zoo ([zoo.md](../zoo.md)) under torch's scalar kernels "
             "(`ATEN_CPU_CAPABILITY=default`): another CPU's torch rounds otherwise than this one's vector "
             "kernels.", "",
             f"{result['verdicts']} verdicts, "
             + ("none differing from the zoo's table: every correct port green and every plant red. " if same else
                f"{result['differing from the table']} differing from the zoo's table. ")
             + f"The run took {result['wall seconds']} s of wall time ({result['wall seconds said']}).", "",
             "| rule | pairs (K) | clean (largest) | planted (smallest) | margin |", "|---|---|---|---|---|"]
    lines += [f"| {r['rule']} | {r['K']} | {r['clean']:g} | {r['planted']:g} | {r['margin']:g} |"
              for r in result["rules"]]
    lines += ["", "Ratios as in the zoo's table: a rule's max diff over its allowance (over 1: red); margin: planted "
              "over clean.", "", "## Correct ports that differ under these kernels", ""]
    for p in result["ports"]:
        lines += [f"- **{p['port']}.** Under these kernels: {p['under these kernels']}.", "",
                  f"  Judged: {p['judged by']}.", "", f"  Clean: {p['clean']}; {p['planted']}.", ""]
    return "\n".join(lines[:-1]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "zoo_kernels.md",
                    help="the page; its .json beside it")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    if not args.page:
        raise PipelineError(f"the run is the zoo's own (`{COMMAND}`): record its figures "
                            f"in {args.out.with_suffix('.json').name}, then write the page with --page")
    json_path = require(args.out.with_suffix(".json"), f"{COMMAND}, its figures recorded there")
    bench_doc.write(args.out, render(json.loads(json_path.read_text())))


if __name__ == "__main__":
    run_main(main)
