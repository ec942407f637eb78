"""The zoo under torch's scalar kernels (docs/bench/zoo_kernels.md): a run of the whole zoo (tools/zoo, docs/zoo.md)
with `ATEN_CPU_CAPABILITY=default`, as another CPU's torch rounds, and the correct ports green there only by what
the library judges rounding with: a ReLU kink judged on Paddle's branch (portcheck.gradients.kinks), a training's
final metric within torch's own runs under other kernels (training.torch_kernels). The run is the zoo's own command,
its pages written into a folder outside the repository; this tool reads the JSON that run writes beside its --out
(zoo.json) and keeps what the page says in docs/bench/zoo_kernels.json, the run's command, date, CPU and load with
it: every figure is the run's, none typed.

    ATEN_CPU_CAPABILITY=default python -m tools.zoo.run --out DIR/zoo.md --guide DIR/guide.md
    python tools/bench_zoo_kernels.py --run DIR/zoo.json   # zoo_kernels.json and its page from that run
    python tools/bench_zoo_kernels.py --page               # the page again from zoo_kernels.json
"""
import argparse
import json
import re
import shlex
from pathlib import Path

from portcheck.core.errors import PipelineError, require, run_main
from portcheck.core.fileio import read_json
from tools import bench_doc
from tools.zoo import recorded

SETTING = "ATEN_CPU_CAPABILITY=default"  # the run's kernels: torch's scalar ones
LIMIT = 1 << 24  # bytes of a zoo run's JSON read at most (the whole zoo's: about 0.3 MB)
COMMAND = f"{SETTING} python -m tools.zoo.run"
# the zoo's rules the page gives margins for: the backward steps' and the first forward's, each module
RULES = ("compare_backward (K=128)", "forward, every module (K=16)")
KINK = re.compile(r"kink in step \d+'s forward: [^;]*")  # a kink line's figures, before the rule judging it
BEYOND = "which no port can meet there"  # a training's final metric: torch's own spread over the task's bound
# how each such port is judged, by what the run found: a kink in the first forward, in a later step's, a training
JUDGED = {
    "first": "torch's run again taking Paddle's side of 0 at those values stands for torch's: its float64 and moved "
             "runs moved by as much, so that torch's own error and spread stay the yardsticks "
             "(`portcheck.gradients.kinks.ON_BRANCH`)",
    "later": "torch's run again from its start, taking Paddle's side of 0 there, is torch against itself at every "
             "row after it, `calibrated.SPREAD` x it allowed (`portcheck.gradients.kinks.take`)",
    "training": "the final metric's bound is widened by how far torch's own runs end from this one, each from its "
                "weights moved one ulp and under other kernels (other thread counts, oneDNN off: "
                "`training.torch_kernels`), as docs/rules.md has a user make them (`judge_and_log(own=)`)"}
KINKS = ("A kink: values of a forward within rounding of 0 (torch's own fp32 error there, or the floor where that is "
         "more; recorded within `kinks.BAND` of it) on opposite sides of it in the two runs, where a ReLU or max after "
         "them opens on one side and shuts on the other: a jump in the gradients no multiple of torch's own error "
         "covers. compare_backward makes torch's run again taking Paddle's side of 0 there only for a red run.")


def shown(command: str) -> str:
    """The run's command with a folder outside the repository (where its pages went) said as DIR: no machine's path
    on a committed page."""
    inside = lambda a: bench_doc.ROOT in Path(a).resolve().parents
    return shlex.join([f"DIR/{Path(a).name}" if a.startswith("/") and not inside(a) else a
                       for a in shlex.split(command)])


def three(v) -> float:
    """A figure to three digits (numpy's were written as text)."""
    return float(f"{float(v):.3g}")


def rule_row(row: dict) -> dict:
    """A rule's row of the run's margins."""
    return {"rule": row["rule"].split(" (K=")[0], "K": int(re.search(r"K=(\d+)", row["rule"]).group(1)),
            "clean": three(row["clean"]), "clean case": row["clean_case"], "planted": three(row["planted"]),
            "planted case": row["planted_case"], "margin": three(row["margin"])}


def plants(results: list, case: str, rule: str) -> list:
    """Each plant of `case`: where it is red and the share of its allowance used there (rule: the one judged)."""
    out = []
    for r in results:
        if r["case"] == case and r["plant"] is not None:
            red = [j for j in r["judgements"] if not j["passed"] and (rule is None or j["rule"] == rule)]
            out.append({"plant": r["plant"], "verdict": r["got"],
                        "red at": red[0]["where"] if red else "", "used": three(red[0]["used"]) if red
                        and rule else None})
    return out


def ports(results: list) -> list:
    """The correct ports the run found green only by a kink judged on Paddle's branch or torch's own runs' spread,
    each with what the library said there and its plants."""
    out = []
    for r in (r for r in results if r["plant"] is None):
        for j in r["judgements"]:
            kinks = KINK.findall(j["detail"])
            if any(p["case"] == r["case"] for p in out):  # a case's first rule saying so (plain before isolated)
                break
            if kinks:
                out.append({"case": r["case"], "said": kinks, "rule": j["rule"], "used": three(j["used"]),
                            "judged": list(dict.fromkeys("first" if k.startswith("kink in step 1's") else "later"
                                                         for k in kinks)),
                            "plants": plants(results, r["case"], j["rule"])})
            elif j["rule"] == "training curves" and BEYOND in j["detail"]:
                final = next(p for p in j["detail"].split(" | ")[0].split("; final metric: ")
                             if BEYOND in p).removeprefix("final metric: ")
                out.append({"case": r["case"], "said": [final], "rule": "", "used": None, "judged": ["training"],
                            "plants": plants(results, r["case"], None)})
    return out


def from_run(run: dict) -> dict:
    """What the page says, from the zoo's run under these kernels (its zoo.json)."""
    facts = run[bench_doc.RUN]
    if not facts.get("command", "").startswith(SETTING + " "):
        raise PipelineError(f"that run was not made under torch's scalar kernels (its command: "
                            f"{facts.get('command')!r}): run `{COMMAND} --out DIR/zoo.md --guide DIR/guide.md`")
    rules = {row["rule"]: row for row in run["rules"]}
    missing = [r for r in RULES if r not in rules]
    if missing:
        raise PipelineError(f"that run applied no {', '.join(missing)}: give the whole zoo's run (no --only, --fast)")
    differing = [f"{r['case']}: {r['plant'] or '(correct port)'}: {r['got']}" for r in run["results"]
                 if r["got"] != "ok"]
    return {bench_doc.RUN: {**facts, "command": shown(facts["command"])}, "verdicts": len(run["results"]),
            "differing": differing, "wall seconds": run["seconds"], "rules": [rule_row(rules[r]) for r in RULES],
            "ports": ports(run["results"])}


def port_lines(p: dict) -> list:
    """A correct port's entry: what the library said there, how that is judged, its figure and its plants'."""
    said, judged = "; ".join(p["said"]), "; ".join(JUDGED[k] for k in p["judged"])
    reds = "; ".join(f"{q['plant']} red at {q['red at']}" + (f" ({q['used']:g})" if q["used"] is not None else "")
                     if q["verdict"] == "ok" else f"{q['plant']}: {q['verdict']}" for q in p["plants"])
    clean = f"green at {p['used']:g} of its allowance ({p['rule']})" if p["used"] is not None else "green"
    return [f"- **{p['case']}.** The run said: {said}.", "", f"  Judged: {judged}.", "",
            f"  Correct port {clean}; " + (reds or "no plant") + ".", ""]


def render(result: dict) -> str:
    """The page, from the JSON beside it alone."""
    differing = result["differing"]
    lines = ["# The zoo under another CPU's kernels", "",
             bench_doc.header(result.get(bench_doc.RUN), COMMAND), "",
             "A run of the whole zoo ([zoo.md](../zoo.md)) under torch's scalar kernels "
             f"(`{SETTING}`): another CPU's torch rounds otherwise than this one's vector kernels. Its figures are "
             "read from the JSON it writes beside its page (`python tools/bench_zoo_kernels.py --run DIR/zoo.json`).",
             "", f"{result['verdicts']} verdicts, "
             + ("none differing from the zoo's table: every correct port green and every plant red. " if not differing
                else f"{len(differing)} differing from the zoo's table: {'; '.join(differing)}. ")
             + f"The run took {result['wall seconds']} s of wall time.", "",
             "| rule | pairs (K) | clean (largest) | planted (smallest) | margin |", "|---|---|---|---|---|"]
    lines += [f"| {r['rule']} | {r['K']} | {r['clean']:g} ({r['clean case']}) | {r['planted']:g} "
              f"({r['planted case']}) | {r['margin']:g} |" for r in result["rules"]]
    lines += ["", "Ratios as in the zoo's table: a rule's max diff over its allowance (over 1: red); margin: planted "
              "over clean.", "", "## Correct ports green by the rules made for rounding", "", KINKS, "",
              "A training's final metric that torch's own runs end apart on by more than the task's bound (a count "
              "metric moves by one item) is judged within their spread, the row saying no port can meet the bound "
              "there.", ""]
    for p in result["ports"]:
        lines += port_lines(p)
    if not result["ports"]:
        lines += ["None: no kink crossed and no training beyond the task's bound in this run.", ""]
    return "\n".join(lines[:-1]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=(bench_doc.PAGES / recorded.KERNELS_JSON).with_suffix(".md"),
                    help="the page; its .json beside it")
    ap.add_argument("--run", type=Path, metavar="ZOO_JSON",
                    help=f"the zoo.json `{COMMAND} --out DIR/zoo.md` wrote in DIR: its figures recorded, the page "
                    "written")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    json_path = args.out.with_suffix(".json")
    if args.run is not None:
        how = f"{COMMAND} --out DIR/zoo.md --guide DIR/guide.md"
        try:
            result = from_run(read_json(require(args.run, how), LIMIT))
        except (ValueError, OSError) as e:
            raise PipelineError(f"{args.run}: not readable as the zoo's run ({e}): give the zoo.json of `{how}`")
        except (KeyError, TypeError, AttributeError, IndexError) as e:
            said = f"no {e}" if isinstance(e, KeyError) else "not its layout"
            raise PipelineError(f"{args.run}: not the zoo's run ({said}): give the zoo.json of `{how}`")
        bench_doc.write(json_path, json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    elif not args.page:
        raise PipelineError(f"give --run DIR/zoo.json (the zoo's run: `{COMMAND} --out DIR/zoo.md --guide "
                            "DIR/guide.md`) or --page")
    require(json_path, "python tools/bench_zoo_kernels.py --run DIR/zoo.json")
    bench_doc.write(args.out, render(json.loads(json_path.read_text())))


if __name__ == "__main__":
    run_main(main)
