"""Where the zoo keeps what it records: its two pages (docs/zoo.md, the user's; docs/bench/zoo.md, the figures) and,
beside the benchmark page, one JSON per command that runs it, with the command; the facts of a run; a run's rows
merged over those held and written. The commands that record a run (run.py, families.py, formers.py, paconvert.py,
generating.py, vision.py) and the page that reads the runs (page.py, formers_page.py, generating_page.py,
vision_page.py) take these names from here. A module, not a command.
"""
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

from tools import bench_doc

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "zoo.md"
BENCH = bench_doc.PAGES / "zoo.md"
CASES_JSON, FAMILIES_JSON, FORMERS_JSON = "zoo.json", "zoo_families.json", "zoo_formers.json"  # beside BENCH
CASES_COMMAND, FAMILIES_COMMAND, FORMERS_COMMAND = ("python -m tools.zoo.run", "python -m tools.zoo.families",
                                                    "python -m tools.zoo.formers")
PACONVERT_JSON, PACONVERT_COMMAND = "zoo_paconvert.json", "python -m tools.zoo.paconvert"  # ports made with PaConvert
GENERATION_JSON, GENERATION_COMMAND = "zoo_generation.json", "python -m tools.zoo.generating"  # the generation column
FORMERS_GENERATION_JSON, FORMERS_GENERATION_COMMAND = ("zoo_formers_generation.json",  # PaddleFormers' column
                                                      "python -m tools.zoo.formers_generating")
VISION_JSON, VISION_COMMAND = "zoo_vision.json", "python -m tools.zoo.vision"  # timm against PaddleClas
VISION_REQUIREMENTS = "requirements-vision.txt"  # its optional extra
# beside BENCH: tools/bench_zoo_kernels.py's record of this zoo's run under torch's scalar kernels (not a zoo's command)
KERNELS_JSON = "zoo_kernels.json"
# every run's JSON beside BENCH, one per command above, and KERNELS_JSON: the zoo's whole record
JSONS = (CASES_JSON, FAMILIES_JSON, FORMERS_JSON, PACONVERT_JSON, GENERATION_JSON, VISION_JSON, FORMERS_GENERATION_JSON,
         KERNELS_JSON)
PAGES_COMMAND = f"{CASES_COMMAND} --page"  # both pages again from the runs recorded, running nothing


# the kernels a zoo's run rounds with where its arguments do not show them (another CPU's: docs/bench/zoo_kernels.md):
# said before its command where set
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY",)


def facts(module: str, argv: list) -> dict:
    """The machine's facts before a run (tools/bench_doc.py), its command as the zoo is run: as a module, after the
    kernels' variables it ran under."""
    return {**bench_doc.start(argv), "command": bench_doc.setting(KERNEL_VARIABLES)
            + shlex.join(["python", "-m", module, *argv[1:]])}


def judged_alone(module: str, name: str, flags=(), timeout: float = None, env: dict = None, **row) -> dict:
    """One family's row judged in a process of its own (`python -m <module> --one NAME <flags>`): the JSON line it
    prints last; where it prints none, row with outcome "raises" and its last stderr line; past `timeout` seconds,
    "not judged". Its seconds beside, as it took them, and its CPU seconds ("cpu": the process's own, which other
    jobs on the machine do not stretch as they stretch the wall). env: variables set for that process over ours.
    row: what names it (its family, or pair and architecture)."""
    began, cpu = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = subprocess.run([sys.executable, "-m", module, "--one", name, *flags], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout, env={**os.environ, **(env or {})})
        line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith("{")), None)
        r = json.loads(line) if line else {**row, "outcome": "raises",
                                           "said": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    except subprocess.TimeoutExpired:
        r = {**row, "outcome": "not judged", "said": f"over {timeout:.0f} s"}
    r["seconds"] = round(time.time() - began, 1)
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    r["cpu"] = round(done.ru_utime + done.ru_stime - cpu.ru_utime - cpu.ru_stime, 1)
    return r


def over_held(held, results: list, seconds: float, order: list) -> tuple:
    """(rows, seconds): this run's rows over those `held` records of other families, in `order`; the time their sum
    where rows from before join them."""
    if not held.exists():
        return results, seconds
    mine = {r["family"] for r in results}
    before = [r for r in json.loads(held.read_text(encoding="utf-8"))["results"] if r["family"] not in mine]
    results = sorted(before + results, key=lambda r: order.index(r["family"]) if r["family"] in order else 0)
    return results, sum(r.get("seconds", 0) for r in results)


def written_over(name: str, results: list, seconds: float, run: dict, order: list):
    """docs/bench/<name>: this run's rows (each with the facts of the run that judged it, `run` where it has none)
    over the rows held of the other families (over_held), in `order`. A row held keeps its own run's facts: one
    written before they were recorded stays without (the page says "not recorded"), never this run's."""
    held = BENCH.parent / name
    write(held, *over_held(held, [{**r, "measured": r.get("measured") or run} for r in results], seconds, order))


def write(held, results: list, seconds: float):
    """`held` written: the time, each run that judged a row once (tools/bench_doc.py's facts), the rows."""
    runs = []
    for r in results:
        if r.get("measured", {}) not in runs:
            runs.append(r.get("measured", {}))
    bench_doc.write(held, json.dumps({"seconds": round(seconds), bench_doc.RUN: runs, "results": results},
                                     indent=1) + "\n")
