"""What a comparison costs at LLM size: convert and compare_forward (cumulative, then isolate=True) on a
Llama-shaped pair, transformers' LlamaForCausalLM against paddlenlp's, random weights built offline from a config,
2 x 128 tokens, against one plain forward of each side.

    python tools/bench_llm.py                       # hidden 256, 512, 1024: docs/bench/llm.md, .json, .png
    python tools/bench_llm.py --page                # docs/bench/llm.md again from llm.json, nothing measured
    python tools/bench_llm.py --widths 2048         # the 1.1B pair (needs ~15 GB free; added to the same files)

Each width runs in a process of its own. There every phase (building the pair, a plain forward of each side,
convert, compare_forward, compare_forward(isolate=True)) starts from a reset peak resident memory (VmHWM, reset
through /proc/self/clear_refs, freed heap given back first) and ends by reading it: the peak of that phase, with
both models in memory. Times are taken alike: a phase's best run, the plain forwards' of three (after a warm-up),
a comparison's of three in one phase; its first run, which pays the new pages the trimmed heap gave back, is said
too. The records go to one temporary folder (compare_forward's record_dir=), each run's over the run before's
files, as a user's next comparison writes them; removed afterwards.
Sizes: hidden h, intermediate 2.75 h, h / 64 heads, h / 512 key-value heads (at least 1), 22 layers, vocabulary
32000: h = 2048 is a 1.1B pair (TinyLlama's shape).
Targets: every phase's peak at most 1.5 x the two models' float32 weights; each comparison at most
4 x one plain forward of each side (the torch forward's time plus the Paddle one's).
"""
import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from pathlib import Path

import numpy as np

from bert_sst2 import paths
from portcheck.core.errors import PipelineError, require, run_main
from portcheck.core.fileio import atomic_write
from tools import bench_doc

PEAK_TARGET = 1.5   # x the two models' float32 weights
TIME_TARGET = 4.0   # x one plain forward of each side
CPU_TARGETS = {"compare": 3.0, "isolated": 4.0}  # issue 65, every width, in CPU seconds (cpu_seconds)
TOKENS = (2, 128)
PHASES = ("build", "forward", "convert", "convert_run", "compare", "isolated")  # convert_run: convert(inputs=)
COMPARISONS = 3     # runs of each comparison in one phase: its time the best, its peak the phase's


def sizes(hidden: int) -> dict:
    heads = max(1, hidden // 64)
    return dict(vocab_size=32000, hidden_size=hidden, intermediate_size=hidden * 11 // 4, num_hidden_layers=22,
                num_attention_heads=heads, num_key_value_heads=max(1, hidden // 512), max_position_embeddings=2048,
                rms_norm_eps=1e-5, use_cache=False)


def rss_gb(field: str) -> float:
    """VmHWM (the peak since the last reset) or VmRSS, in GB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / 1e9
    raise PipelineError(f"/proc/self/status has no {field}: this benchmark reads Linux's memory figures")


def reset_peak():
    """Freed heap back to the system (portcheck.core.runtime keeps large blocks), then VmHWM := VmRSS."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def phase(figures: dict, name: str, fn):
    """fn() as one phase: its peak resident memory and its time in figures[name]; fn's result."""
    import gc
    gc.collect()
    reset_peak()
    start = time.perf_counter()
    result = fn()
    figures[name] = {"seconds": round(time.perf_counter() - start, 3), "peak_gb": round(rss_gb("VmHWM"), 3)}
    return result


def cpu_seconds() -> float:
    """This process's CPU time, every thread's (user + system): on a machine other work shares, the wall clock
    counts the waits too, and a ratio of two wall times taken a minute apart says the load as much as the code."""
    t = os.times()
    return t.user + t.system


def available_gb() -> float:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 / 1e9 for line in f if line.startswith("MemAvailable:"))


def measure(hidden: int) -> dict:
    """Every phase at one width, in this process."""
    import paddle
    import torch
    from paddlenlp.transformers import LlamaConfig as PaddleConfig, LlamaForCausalLM as PaddleLlama
    from transformers import LlamaConfig, LlamaForCausalLM
    from portcheck import compare_forward, convert
    config = sizes(hidden)
    params = None
    figures = {"hidden": hidden, "config": config, "libraries_gb": round(rss_gb("VmRSS"), 3)}

    def build():
        torch.manual_seed(0)
        paddle.seed(0)
        pt = LlamaForCausalLM(LlamaConfig(**config, attn_implementation="eager")).eval()
        pd = PaddleLlama(PaddleConfig(**config)).eval()
        return pt, pd
    pt, pd = phase(figures, "build", build)
    params = sum(p.numel() for p in pt.parameters())
    weights = 4 * (params + sum(int(np.prod(p.shape)) for p in pd.parameters())) / 1e9
    figures.update(parameters=int(params), weights_gb=round(weights, 3))
    ids = {"input_ids": np.random.RandomState(0).randint(0, config["vocab_size"], TOKENS).astype("int64")}

    def forwards():
        out = {}
        with torch.no_grad():
            start, cpu = time.perf_counter(), cpu_seconds()
            pt(input_ids=torch.from_numpy(ids["input_ids"]))
            out["torch"], out["torch_cpu"] = time.perf_counter() - start, cpu_seconds() - cpu
        with paddle.no_grad():
            start, cpu = time.perf_counter(), cpu_seconds()
            pd(input_ids=paddle.to_tensor(ids["input_ids"]))
            out["paddle"], out["paddle_cpu"] = time.perf_counter() - start, cpu_seconds() - cpu
        return out
    phase(figures, "warm-up", forwards)  # first calls pay one-time costs (kernels chosen, pools grown)
    # the best of three: a plain forward timed during a burst of other work would make every ratio look better
    runs = phase(figures, "forward", lambda: [forwards() for _ in range(3)])
    figures["forward"].update(**{f"{side}_{unit}": round(min(r[side + key] for r in runs), 3)
                                 for side in ("torch", "paddle") for key, unit in (("", "seconds"), ("_cpu", "cpu"))})
    figures["forward"].update(float64(pt, ids))
    phase(figures, "convert", lambda: convert(pt, pd, layouts={"LlamaLMHead": "transpose"}) and None)
    # modules paired by the models' run (issue 48): both forwards, each output's shape kept, not its values
    phase(figures, "convert_run", lambda: convert(pt, pd, layouts={"LlamaLMHead": "transpose"}, inputs=ids) and None)
    folder = Path(tempfile.mkdtemp(prefix="portcheck-llm-"))
    try:
        for name, isolate in (("compare", False), ("isolated", True)):
            # the runs of one phase, timed as the plain forwards are (one phase, the best of its runs): the first
            # after the trimmed heap pays new pages, ~2 s/GB on this VM (docs/bench/llm.md), and is said beside
            times, cpus = [], []

            def runs():
                for _ in range(COMPARISONS):
                    start, cpu = time.perf_counter(), cpu_seconds()
                    report = compare_forward(pt, pd, ids, isolate=isolate, record_dir=folder)
                    times.append(time.perf_counter() - start)
                    cpus.append(cpu_seconds() - cpu)
                return report
            report = phase(figures, name, runs)
            figures[name].update(seconds=round(min(times), 3), first_seconds=round(times[0], 3), cpu=round(min(cpus), 3))
            worst = max((r for r in report.paired if r.allowed > 0 and not r.problem), key=lambda r: r.max / r.allowed)
            figures[name].update(passed=report.passed, compared=len(report.paired),
                                 first_over=report.first_diverging, largest_use=round(worst.max / worst.allowed, 3),
                                 largest_at=worst.name)
            if isolate:
                figures[name].update(differing=report.differing, isolated_compared=len(report.isolated))
            bad = [r for r in report.paired if not r.passed]
            if bad:
                figures[name]["first_over_why"] = bad[0].why
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return figures


def float64(pt, ids) -> dict:
    """torch's plain forward in float64 (the model cast in place and back: float32 -> float64 -> float32 is exact),
    the best of three after a warm-up, its seconds and CPU seconds: with the plain float32 forwards, the floor of
    what the method's own runs cost (floors), whatever the library around them does."""
    import torch
    x = torch.from_numpy(ids["input_ids"])
    pt.double()
    try:
        with torch.no_grad():
            pt(input_ids=x)
            runs = []
            for _ in range(3):
                start, cpu = time.perf_counter(), cpu_seconds()
                pt(input_ids=x)
                runs.append((time.perf_counter() - start, cpu_seconds() - cpu))
    finally:
        pt.float()
    return {"torch64_seconds": round(min(r[0] for r in runs), 3), "torch64_cpu": round(min(r[1] for r in runs), 3)}


def floors(r: dict) -> dict:
    """{phase: (wall, CPU) ratio of the method's own runs, each a plain forward, over the plain forwards} when torch's
    float64 forward was measured: a comparison is torch fp32 + Paddle fp32 + torch float64; isolate=True adds one
    Paddle run and one float64 run, each module on torch's recorded input."""
    f = r["forward"]
    if "torch64_cpu" not in f:
        return {}
    ratio = lambda unit, more: (f[f"torch_{unit}"] + (1 + more) * (f[f"paddle_{unit}"] + f[f"torch64_{unit}"])) / \
        (f[f"torch_{unit}"] + f[f"paddle_{unit}"])
    return {p: (ratio("seconds", more), ratio("cpu", more)) for p, more in (("compare", 0), ("isolated", 1))}


def write(results: dict, out: Path):
    """docs/bench/llm.json, llm.md and llm.png (the chart, when matplotlib is installed) from every width measured."""
    atomic_write(out.with_suffix(".json"), lambda tmp: Path(tmp).write_text(json.dumps(results, indent=1) + "\n"))
    chart = _chart([results[k] for k in sorted(results, key=int)], out.with_suffix(".png"))
    text = render(results, chart is not None)
    bench_doc.write(out, text)
    return text


def header(results: dict) -> str:
    """Each width's run: its command and facts; the widths measured before the facts were recorded, in one line."""
    widths = sorted(results, key=int)
    unrecorded = [w for w in widths if not results[w].get(bench_doc.RUN)]
    runs = [results[w][bench_doc.RUN] for w in widths if w not in unrecorded]
    if unrecorded:
        runs.insert(0, {"command": f"python tools/bench_llm.py --widths {','.join(unrecorded)}"})
    return bench_doc.header(runs, "python tools/bench_llm.py")


def render(results: dict, chart: bool) -> str:
    """The page, from the JSON (docs/bench/llm.json) alone; `chart`: the picture beside it is linked."""
    rows = [results[k] for k in sorted(results, key=int)]
    lines = ["# A comparison at LLM size", "", header(results), "",
             "CPU only. A Llama-shaped pair, "
             "transformers' LlamaForCausalLM against paddlenlp's, random weights, 22 layers, vocabulary 32000, "
             f"{TOKENS[0]} x {TOKENS[1]} tokens; convert with layouts={{'LlamaLMHead': 'transpose'}} and no name map, "
             "by definition order and by the models' run (inputs=: each output's shape kept, not its values); "
             "compare_forward with record_dir= (records on disk, portcheck.core.spill: every run in one folder, each "
             "writing over the files of the run before, as a user's next comparison does; the first run, new files). "
             "Each phase's peak is the "
             "process's peak resident memory during it (VmHWM), both models in memory. A plain forward's time is the "
             f"best of three after a warm-up, each side's; a comparison's the best of {COMPARISONS} runs in one phase, "
             "as the plain forwards' (its peak the phase's). The first run of a phase starts from a trimmed heap "
             "(malloc_trim, for the peak) and pays new pages: this VM gives freed memory back to its host, and a new "
             "page costs about 2 s/GB here (a 2 GB array filled in 4.1-4.7 s, 0.13 s when the pages were the "
             "process's own); its time is said below as the first run's. Beside each comparison's ratio, its CPU ratio "
             "(\"CPU 3.1x\"): the process's CPU seconds, every thread's, over the plain forwards' (each the best of its "
             "runs): on a machine other work shares, the wall clock counts the waits too. \"The method's own runs "
             "alone\": the plain forwards a comparison is made of, each timed as above (torch's float64 forward with "
             "the model cast to float64 in place): a comparison is torch's float32 run, Paddle's and torch's float64 "
             "one, the yardstick; isolate=True adds one Paddle run and one float64 run, each module on torch's recorded "
             "input. What a comparison costs above them is the library's: recording, pairing, judging.", "",
             f"Targets: peak at most {PEAK_TARGET:g} x the two models' float32 weights; a comparison at "
             f"most {TIME_TARGET:g} x one plain forward of each side (torch's time plus Paddle's).", "",
             "| hidden | parameters (each side) | weights, both (GB) | libraries loaded (GB) | peak: build | forward | convert | "
             "convert, inputs= | compare | isolated | forward torch + Paddle (s) | compare (s) | isolated (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        w, f = r["weights_gb"], r["forward"]
        plain = f["torch_seconds"] + f["paddle_seconds"]
        peak = lambda p: f"{r[p]['peak_gb']:.2f} GB ({r[p]['peak_gb'] / w:.2f}x)" if p in r else "-"  # not measured then
        lines.append(f"| {r['hidden']} | {r['parameters'] / 1e6:.0f}M | {w:.2f} | {r['libraries_gb']:.2f} | " +
                     " | ".join(peak(p) for p in PHASES) +
                     f" | {f['torch_seconds']:.2f} + {f['paddle_seconds']:.2f} | "
                     f"{r['compare']['seconds']:.1f} ({r['compare']['seconds'] / plain:.1f}x{cpu(r, 'compare')}) | "
                     f"{r['isolated']['seconds']:.1f} ({r['isolated']['seconds'] / plain:.1f}x{cpu(r, 'isolated')}) |")
    lines += ["", "## Targets", ""]
    for r in rows:
        w, f = r["weights_gb"], r["forward"]
        plain = f["torch_seconds"] + f["paddle_seconds"]
        worst = max((p for p in PHASES if p in r), key=lambda p: r[p]["peak_gb"])
        peak = r[worst]["peak_gb"] / w
        times = {p: r[p]["seconds"] / plain for p in ("compare", "isolated")}
        said = lambda ok: "met" if ok else "**not met**"
        lines.append(f"* hidden {r['hidden']} ({r['parameters'] / 1e9:.2f}B parameters): peak {said(peak <= PEAK_TARGET)} "
                     f"({peak:.2f}x the weights, in {worst}); time {said(times['compare'] <= TIME_TARGET)} for the "
                     f"cumulative comparison ({times['compare']:.1f}x one plain forward of each side), "
                     f"{said(times['isolated'] <= TIME_TARGET)} with isolate=True ({times['isolated']:.1f}x; it is the "
                     "cumulative run plus one forced run of each side). Above the built pair: "
                     f"{r['compare']['peak_gb'] - r['build']['peak_gb']:.2f} GB comparing, "
                     f"{r['isolated']['peak_gb'] - r['build']['peak_gb']:.2f} GB isolated." +
                     ("".join(f" {p.capitalize()}'s first run, from the trimmed heap: {r[p]['first_seconds']:.1f} s "
                              f"({r[p]['first_seconds'] / plain:.1f}x)." for p in ("compare", "isolated")
                              if "first_seconds" in r[p])) +
                     (" By CPU seconds: " + ", ".join(
                         f"{p} {ratio:.2f}x ({said(ratio <= CPU_TARGETS[p])}, {CPU_TARGETS[p]:g}x)"
                         for p, ratio in cpu_ratios(r).items()) + "." if cpu_ratios(r) else "") +
                     (" The method's own runs alone: " + ", ".join(f"{p} {wall:.2f}x (CPU {cpu_:.2f}x)"
                                                                    for p, (wall, cpu_) in floors(r).items()) + "."
                      if floors(r) else ""))
    lines.append(f"* The libraries loaded before anything is built (torch, Paddle, transformers, paddlenlp) take "
                 f"{rows[0]['libraries_gb']:.2f} GB: the small widths' peak multiples are mostly that; what a "
                 "comparison adds above the built pair stays about the same at every width.")
    if not any(r["hidden"] == 2048 for r in rows):
        lines.append("* hidden 2048 (the 1.1B pair): pending, not measured yet (`python tools/bench_llm.py --widths "
                     "2048`, ~15 GB free memory).")
    lines += ["", "## Repeated runs", "",
              "Each width's runs on the code measured (the table above is the last). This machine's speed varies from "
              "one run to the next, so a ratio near a target is said with its spread.", "",
              "| hidden | runs | plain forwards (s) | compare | isolated | peak | isolated, first run of its "
              "phase |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        runs = r.get("runs", [])
        if runs:
            spread = lambda k, unit="x": (f"{min(x[k] for x in runs):.2f}{unit} - {max(x[k] for x in runs):.2f}{unit}"
                                          if len(runs) > 1 else f"{runs[0][k]:.2f}{unit}")
            met = lambda k, target: sum(x[k] <= target for x in runs)
            lines.append(f"| {r['hidden']} | {len(runs)} | {spread('plain_seconds', ' s')} | "
                         f"{spread('compare_ratio')} ({TIME_TARGET:g}x met in {met('compare_ratio', TIME_TARGET)}) | "
                         f"{spread('isolated_ratio')} ({TIME_TARGET:g}x met in {met('isolated_ratio', TIME_TARGET)}) | "
                         f"{spread('peak_ratio')} ({PEAK_TARGET:g}x met in {met('peak_ratio', PEAK_TARGET)}) | " +
                         (spread("isolated_first_ratio") if all("isolated_first_ratio" in x for x in runs) else "-") +
                         " |")
    lines += ["", "## Verdicts (a clean port, random weights)", ""]
    for r in rows:
        for p in ("compare", "isolated"):
            v = r[p]
            text = (f"green, {v['compared']} outputs compared, largest use {v['largest_use']:.3g} of the allowance "
                    f"({v['largest_at']})" if v["passed"] else
                    f"red: {v.get('first_over_why') or v['first_over']}")
            if p == "isolated":
                text += ("; every module's own computation within its rule" if not v["differing"] else
                         f"; own computation differs: {', '.join(v['differing'][:4])}")
            lines.append(f"* hidden {r['hidden']}, {p}: {text}")
    if chart:
        lines += ["", "## Scaling", "", "![peak memory and time against size](llm.png)"]
    return "\n".join(lines) + "\n"


def cpu_ratios(r: dict) -> dict:
    """{phase: its CPU seconds over the plain forwards'} of the comparisons, when measured (runs before had none)."""
    f = r["forward"]
    return {p: r[p]["cpu"] / (f["torch_cpu"] + f["paddle_cpu"]) for p in ("compare", "isolated")
            if "cpu" in r[p] and "torch_cpu" in f}


def cpu(r: dict, phase: str) -> str:
    """"; CPU 3.1x": the phase's CPU ratio (cpu_ratios), when measured."""
    ratio = cpu_ratios(r).get(phase)
    return "" if ratio is None else f"; CPU {ratio:.1f}x"


def _chart(rows, path):
    """The peak (x weights) and the time (x plain forwards) of each phase against the parameters; None without
    matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    x = [r["parameters"] / 1e6 for r in rows]
    fig, (mem, sec) = plt.subplots(1, 2, figsize=(10, 4))
    for p in PHASES:
        had = [(xi, r) for xi, r in zip(x, rows) if p in r]  # a phase added later: the widths measured since
        mem.plot([xi for xi, _ in had], [r[p]["peak_gb"] / r["weights_gb"] for _, r in had], marker="o", label=p)
    mem.axhline(PEAK_TARGET, color="grey", linestyle="--", label="target")
    for p in ("compare", "isolated"):
        sec.plot(x, [r[p]["seconds"] / (r["forward"]["torch_seconds"] + r["forward"]["paddle_seconds"]) for r in rows],
                 marker="o", label=p)
    sec.axhline(TIME_TARGET, color="grey", linestyle="--", label="target")
    for ax, title in ((mem, "peak resident memory / both models' fp32 weights"),
                      (sec, "time / one plain forward of each side")):
        ax.set_xscale("log")
        ax.set_xlabel("parameters per side (millions)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90))
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--widths", default="256,512,1024", help="hidden sizes to measure, comma-separated (default "
                                                             "256,512,1024; 2048 is the 1.1B pair)")
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "llm.md",
                    help="the report (its .json and .png beside it); widths measured before are kept")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)  # one width, in a process of its own
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    if args.page:
        require(args.out.with_suffix(".json"), "python tools/bench_llm.py")
        results = json.loads(args.out.with_suffix(".json").read_text())
        bench_doc.write(args.out, render(results, args.out.with_suffix(".png").is_file()))
        return
    if args.child is not None:
        print(json.dumps(measure(args.child)))
        return
    try:
        widths = [int(w) for w in args.widths.split(",")]
    except ValueError:
        raise PipelineError(f"--widths {args.widths!r}: give hidden sizes, comma-separated, e.g. 256,512") from None
    if any(w < 64 or w % 64 for w in widths):
        raise PipelineError(f"--widths {args.widths}: each hidden size is a multiple of 64 (one head), at least 64")
    json_path = args.out.with_suffix(".json")
    results = json.loads(json_path.read_text()) if json_path.is_file() else {}
    for hidden in widths:
        need = 4 * 2 * sum_params(hidden) / 1e9 * PEAK_TARGET + 2
        if available_gb() < need:
            raise PipelineError(f"hidden {hidden} needs about {need:.0f} GB of free memory, {available_gb():.1f} GB "
                                "available: close other work first")
        print(f"hidden {hidden}: measuring ...", flush=True)
        facts = bench_doc.start()
        run = subprocess.run([sys.executable, __file__, "--child", str(hidden)], capture_output=True, text=True)
        if run.returncode:
            tail = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise PipelineError(f"hidden {hidden}: the measuring process failed: {tail}")
        measured = json.loads(run.stdout.strip().splitlines()[-1])
        measured["runs"] = repeated(results.get(str(hidden)), measured)
        measured[bench_doc.RUN] = bench_doc.finish(facts)
        results[str(hidden)] = measured
        print(json.dumps(results[str(hidden)]), flush=True)
        write(results, args.out)
    print(write(results, args.out))


def code_version() -> str:
    """The last commit that changed what is measured (the library, this script), "+changes" when either differs
    from it: runs of one version are repeats of one measurement, a docs commit starts no new series."""
    git = lambda *a: subprocess.run(["git", *a], cwd=paths.ROOT, capture_output=True, text=True).stdout.strip()
    where = ["--", "lib/portcheck", "tools/bench_llm.py"]
    return (git("log", "-1", "--format=%h", *where) or "unknown") + ("+changes" if git("status", "--porcelain", *where) else "")


def repeated(before, measured) -> list:
    """Every run of this width on this version of the code: the earlier ones (before's, when the same version)
    and this one, each its ratios; the report says their spread, since this shared machine's speed varies
    between runs by more than a target's margin."""
    version = code_version()
    f = measured["forward"]
    plain = f["torch_seconds"] + f["paddle_seconds"]
    run = {"version": version, "plain_seconds": round(plain, 3),
           **{f"{p}_seconds": measured[p]["seconds"] for p in ("compare", "isolated")},
           **{f"{p}_ratio": round(measured[p]["seconds"] / plain, 3) for p in ("compare", "isolated")},
           **{f"{p}_first_ratio": round(measured[p]["first_seconds"] / plain, 3) for p in ("compare", "isolated")
              if "first_seconds" in measured[p]},
           **{f"{p}_cpu_ratio": round(measured[p]["cpu"] / (f["torch_cpu"] + f["paddle_cpu"]), 3)
              for p in ("compare", "isolated") if "cpu" in measured[p] and "torch_cpu" in f},
           "peak_ratio": round(max(measured[p]["peak_gb"] for p in PHASES if p in measured) / measured["weights_gb"], 3)}
    earlier = [r for r in (before or {}).get("runs", []) if r.get("version") == version and "+changes" not in version]
    return earlier + [run]


def sum_params(hidden: int) -> int:
    """Parameters of one side, from the sizes alone (before anything is built)."""
    c = sizes(hidden)
    h, i, kv = c["hidden_size"], c["intermediate_size"], c["num_key_value_heads"] * 64
    layer = 2 * h * h + 2 * h * kv + 3 * h * i + 2 * h
    return c["num_hidden_layers"] * layer + 2 * c["vocab_size"] * h + h


if __name__ == "__main__":
    run_main(main)
