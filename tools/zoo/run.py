"""The zoo of real pairs: every case of tools/zoo/cases.py, its correct port and each planted bug, judged through
portcheck's public API; the verdicts compared with the table's.

    python -m tools.zoo.run                 # every case; writes docs/bench/zoo.json, docs/zoo.md, docs/bench/zoo.md
    python -m tools.zoo.run --fast          # the suite's part (tests/test_zoo.py): schedulers, optimizers, ...; writes nothing
    python -m tools.zoo.run --only StepLR   # one case (a name as the table spells it); writes nothing
    python -m tools.zoo.run --page          # both pages again from docs/bench/zoo.json and zoo_families.json

from any directory (tools/ is installed with the project: the zoo's modules import each other as tools.zoo.*).

Prints one line per correct port and per plant: what the library said, where, and whether that is the table's
verdict ("false red": a correct port red; "false green": a plant green; "wrong place": red, but not where the bug
is). Then, per rule the library applied, the largest share of its allowance a correct port used, the smallest a
caught plant used, and the margin between. Exits 1 when a verdict differs from the table's and is not a known
mismatch (`known` in the table, with the issue tracking it).
"""
import argparse
import json
import math
import sys
import time
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch, Paddle)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

from portcheck.core.errors import PipelineError, first_line, run_main

try:
    from tools import bench_doc
    from tools.zoo import cases, page, recorded
except ModuleNotFoundError:  # run by its path: the repository's root is not on sys.path
    raise SystemExit("error: run the zoo from the repository's root as `python -m tools.zoo.run`") from None
from tools.zoo.page import figure, said


def run_one(case, plant):
    """(judgements, error): the check of `case` on its correct port (plant None) or one plant. An error the
    check raised is one line, never a traceback: it is a result of the zoo too."""
    from tools.zoo import checks
    try:
        return checks.CHECKS[case["check"]](case, plant), ""
    except PipelineError as e:
        return [], f"portcheck: {e}"
    except Exception as e:  # noqa: BLE001 (a pair's own code failing is reported as that case's outcome)
        return [], first_line(e)


def outcome(case, plant, judgements, error) -> dict:
    """The verdict against the table's: ok, or false red / false green / wrong place / error; known mismatches
    carry their issue."""
    red = [j for j in judgements if not j.passed]
    refused = (plant or {}).get("refused")
    if refused:  # a plant the library must refuse before judging, saying so at its place
        got = "ok" if refused in error and plant["where"] in error else "error" if error else "not refused"
    elif error:
        got = "error"
    elif plant is None and case.get("by_design"):  # red by design: red, every red rule saying the library's line
        unsaid = [j.rule for j in red if case["by_design"] not in j.detail]
        got = "false green (red by design expected)" if not red else \
            f"red without the by-design line ({', '.join(unsaid)})" if unsaid else "ok"
    elif plant is None:
        got = "ok" if not red else "false red"
    else:  # red at each of its steps, every red rule there naming its place
        got = "ok"
        for step in steps_of(plant):
            at_step = [j for j in red if j.step == step]
            green = [rule for rule in plant.get("red", ()) if not any(j.rule.startswith(rule) for j in at_step)]
            if not at_step or green:
                got = f"false green at step {step}" + (f" ({', '.join(green)})" if green else "")
                break
            if not all(names(plant["where"], j) for j in at_step):
                got = f"wrong place at step {step}"
                break
    known = (plant or case).get("known")
    status = got
    if known and got != "ok":
        status = f"known ({known['issue']})" if known.get("got", got) == got else got
    elif known and got == "ok":
        status = "fixed: remove known"
    elif plant is None and case.get("by_design") and got == "ok":
        status = "ok: red by design"
    return {"case": case["name"], "group": case["group"], "plant": plant["name"] if plant else None,
            "steps": list(case["steps"]), "got": got, "status": status, "error": error,
            "by_design": case.get("by_design", "") if plant is None else "", "expected": expected(case, plant),
            "known": known, "expected_where": plant["where"] if plant else "",
            "judgements": [j._asdict() for j in judgements]}


def steps_of(plant) -> tuple:
    return plant["step"] if isinstance(plant["step"], (tuple, list)) else (plant["step"],)


def names(where, judgement) -> bool:
    """A red judgement names the plant's place: `where` in what it said (where: a str, or {rule prefix: str}, a
    rule it does not list left unconstrained)."""
    if isinstance(where, dict):
        want = next((w for prefix, w in where.items() if judgement.rule.startswith(prefix)), None)
        return want is None or want in judgement.where
    return where in judgement.where


def expected(case, plant) -> str:
    if plant and plant.get("refused"):
        return f"refused at {plant['where']}: ...{plant['refused']}..."
    if plant is None:
        return f"red by design: {case['by_design']}" if case.get("by_design") else "green"
    return f"red at step {', '.join(map(str, steps_of(plant)))}, {place(plant['where'])}"


def place(where) -> str:
    return " / ".join(where.values()) if isinstance(where, dict) else where


def selected(fast: bool, only: str) -> list:
    table = cases.by_name()
    if only is not None:
        if only not in table:
            raise PipelineError(f"--only {only!r}: no such case; the cases are: {', '.join(table)}")
        return [table[only]]
    return [c for c in cases.CASES if c.get("fast") or not fast]


def runs(case) -> list:
    return [None] + list(case["plants"])


def margins(results) -> list:
    """Per rule: the largest share a correct port used (every correct port; and leaving out the known false reds
    the table lists), the smallest share a plant it caught used, and the margin between the two latter."""
    rules = {}
    for r in results:
        for j in r["judgements"]:
            row = rules.setdefault(j["rule"], {"rule": j["rule"], "cases": 0, "false_red": 0, "clean_all": 0.0,
                                               "clean": 0.0, "clean_case": "", "planted": math.inf,
                                               "planted_case": ""})
            if r["plant"] is None:
                row["cases"] += 1
                row["false_red"] += not j["passed"] and not r.get("by_design")  # a declared design difference
                row["clean_all"] = max(row["clean_all"], j["used"])
                known_red = (r["status"].startswith("known") or r.get("by_design")) and not j["passed"]
                if not known_red and j["used"] >= row["clean"]:
                    row["clean"], row["clean_case"] = j["used"], r["case"]
            elif not j["passed"] and j["used"] < row["planted"]:
                row["planted"], row["planted_case"] = j["used"], f"{r['case']}: {r['plant']}"
    for row in rules.values():
        finite = math.isfinite(row["clean"])
        row["margin"] = (row["planted"] / row["clean"] if row["clean"] > 0 else math.inf) if finite else 0.0
    return list(rules.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--fast", action="store_true", help="only the cases the suite runs (tests/test_zoo.py)")
    ap.add_argument("--only", metavar="NAME", help="one case, by its name in tools/zoo/cases.py; writes nothing")
    ap.add_argument("--page", action="store_true", help="write both pages again from the runs recorded beside the "
                    "benchmark page: nothing is run")
    ap.add_argument("--out", type=Path, default=recorded.BENCH, help="the benchmark page; its runs recorded beside it "
                    f"({recorded.CASES_JSON}, {recorded.FAMILIES_JSON}; default docs/bench/zoo.md)")
    ap.add_argument("--guide", type=Path, default=recorded.GUIDE, help="the user's page (default docs/zoo.md)")
    args = ap.parse_args()
    if args.page:
        page.write(args.guide, args.out)
        return 0
    chosen = selected(args.fast, args.only)
    facts = recorded.facts("tools.zoo.run", sys.argv)
    start, results = time.time(), []
    for case in chosen:
        if case.get("skip"):
            print(f"{case['name']}: not run: {case['skip']}")
            continue
        for plant in runs(case):
            judgements, error = run_one(case, plant)
            r = outcome(case, plant, judgements, error)
            results.append(r)
            print(f"{r['status']:>12}  {case['name']}: {plant['name'] if plant else '(correct port)'}; expected "
                  f"{expected(case, plant)}; {said(r)}", flush=True)
    seconds = time.time() - start
    rules = margins(results)
    print(f"\n{'rule':<44} {'cases':>5} {'false red':>9} {'clean,all':>9} {'clean':>9} {'planted':>9} {'margin':>9}")
    for row in rules:
        print(f"{row['rule']:<44} {row['cases']:>5} {row['false_red']:>9} {figure(row['clean_all']):>9} "
              f"{figure(row['clean']):>9} {figure(row['planted']):>9} {figure(row['margin']):>9}")
    bad = [r for r in results if r["got"] != "ok"]
    unknown = [r for r in bad if not r["status"].startswith("known")] + \
        [r for r in results if r["status"].startswith("fixed")]
    print(f"\n{len(results)} verdicts, {len(bad)} differ from the table's ({len(bad) - len(unknown)} known), "
          f"{seconds:.0f} s")
    if args.only is None and not args.fast:  # docs/ holds the whole zoo's table, never a part's
        run = {"seconds": round(seconds), bench_doc.RUN: bench_doc.finish(facts), "rules": rules, "results": results}
        bench_doc.write(args.out.parent / recorded.CASES_JSON, json.dumps(run, indent=1, default=str) + "\n")
        page.write(args.guide, args.out)
        print(f"wrote {recorded.CASES_JSON}, {args.out.name} beside it and {args.guide.name}")
    raise SystemExit(1 if unknown else 0)


if __name__ == "__main__":
    run_main(main)
