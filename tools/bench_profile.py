"""Training speed, Paddle against torch on CPU (docs/bench/speed.md): what a Step 5 training step costs each
framework, where Paddle's time goes, each lever tried and its measured effect, one SST-2 epoch and the machine's
limit. The figures were measured by hand (profiles, probes, the reference Step 5 runs), each with the method,
command, date, CPU and load recorded beside it in docs/bench/speed.json (null: not recorded); the headline step is
tools/bench_speed.py's (docs/bench/bench_speed.json). This tool writes the page from those two JSON files alone.

    python tools/bench_profile.py --page     # docs/bench/speed.md again from speed.json and bench_speed.json
"""
import argparse
import json
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (the venv's check, as every tool's)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from portcheck.core.errors import PipelineError, require, run_main
from tools import bench_doc, bench_speed

SPEED = "bench_speed"        # the headline figures' JSON beside the page (bench_speed.json), its tool's
NONE = "not recorded"


def ratio(torch: float, paddle: float) -> float:
    """Paddle's throughput over torch's: torch's seconds over Paddle's (>= 1: Paddle no slower)."""
    return torch / paddle


def span(values, fmt="{:.2f}") -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"


def shape(s) -> str:
    return f"[{s[0]}, {s[1]}]"


def same_run(data: dict, report: dict) -> None:
    """bench_speed.json holds the run speed.json describes (its method, torch's AdamW): a run taken again since
    would be rendered under the old one's description."""
    said = data["measured"]["full run"]["run"]
    run = bench_speed.facts(report)
    if any(run.get(k) != v for k, v in said.items()):
        raise PipelineError(f"{SPEED}.json holds another run ({run.get('command')}, load {run.get('load before')}) "
                            "than the one speed.json describes: update speed.json's \"full run\" (its run, method "
                            "and the step row's torch AdamW) to the new run, then write the page with --page")


def full_run(m: dict, report: dict) -> dict:
    """The headline run's facts as the other measurements hold them, from bench_speed.json."""
    run = bench_speed.facts(report)
    loads = [f"{run[k]:.1f} {k.split()[1]}" for k in ("load before", "load after") if run.get(k) is not None]
    cpu = ", ".join(str(f) for f in (run.get("cpu"), run.get("cores") and f"{run['cores']} cores") if f)
    return {**m, "command": run.get("command"), "date": run.get("date"), "cpu": cpu or None,
            "load": "1-min load " + " and ".join(loads) if loads else None}


def legend(data: dict, report: dict, ids) -> list:
    """How each measurement a table holds was taken: its method, command, date, CPU and load as recorded."""
    lines = ["Measured:", ""]
    for i in dict.fromkeys(ids):
        m = data["measured"][i]
        m = full_run(m, report) if m.get("from") == f"{SPEED}.json" else m
        command = f"`{m['command']}`" if m.get("command") else NONE
        lines.append(f"- *{i}*: {m['how']}. Command: {command}. Date: {m.get('date') or NONE}. "
                     f"CPU: {m.get('cpu') or NONE}. Load: {m.get('load') or NONE}.")
    return lines + [""]


def twins(report: dict, mode: str, pair=("pt_bert", "pd_bert")) -> list:
    return [r for r in report["rows"] if r["mode"] == mode and (r["torch_model"], r["paddle_model"]) == pair]


def full_step(report: dict, seq: int = 40) -> dict:
    """The full run's twins' train step at [32, seq]."""
    return next(x for x in twins(report, "train") if x["seq"] == seq)


def seconds(r: dict, report: dict) -> tuple:
    """(torch, Paddle) train-step seconds of a row: its own, or the full run's medians at p50."""
    if r.get("from") != f"{SPEED}.json":
        return r["torch"], r["paddle"]
    full = full_step(report)
    return full["torch_s"]["median"], full["paddle_s"]["median"]


def step(data: dict, report: dict) -> list:
    """A Step 5 training step: the full run's median shape, then the runs measured by hand."""
    target = data["target ratio"]
    rows, ratios = [], {}
    for r in data["step"]:
        if r.get("from") == f"{SPEED}.json":
            full = full_step(report, r["shape"][1])
            t, p = full["torch_s"]["median"], full["paddle_s"]["median"]
            best = full["torch_s"]["min"] / full["paddle_s"]["min"]
            opt = (full["torch_phases"]["optimizer"], full["paddle_phases"]["optimizer"])
        else:
            t, p, best, opt = r["torch"], r["paddle"], r["best"], r["optimizer"]
        ratios[r["measured"]] = ratio(t, p)
        rows.append(f"| {shape(r['shape'])} | {r['threads']} | {r['clock']} | {r['torch adamw']} | {t:.3f} | "
                    f"{p:.3f} | **{ratio(t, p):.2f}**" + (f" ({best:.2f})" if best else "") + " | "
                    + (f"{opt[0]:.3f} / {opt[1]:.3f}" if opt else "-") + f" | *{r['measured']}* |")
    train = [x["paddle_over_torch"] for x in twins(report, "train")]
    evals = twins(report, "eval")
    ref = [x["paddle_over_torch"] for x in report["rows"] if x["torch_model"] == "hf_bert"]
    by = {(x["shape"], x["mode"], x["torch_model"]): x for x in report["rows"]}
    own = {side: [by[(s, m, "hf_bert")][f"{side}_s"]["median"] / x[f"{side}_s"]["median"]
                  for (s, m, name), x in by.items() if name == "pt_bert" and (s, m, "hf_bert") in by]
           for side in ("torch", "paddle")}
    p50 = next(x for x in evals if x["shape"] == "p50")
    fused = [ratios[r["measured"]] for r in data["step"] if r["torch adamw"] == "fused"]
    one = next(r["optimizer"] for r in data["step"] if r["torch adamw"] == "fused" and r["threads"] == 1)
    cpu = [ratios[r["measured"]] for r in data["step"] if r["clock"] == "process CPU"]
    lines = ["## A Step 5 training step", "",
             "What one training step (forward, cross-entropy, backward, AdamW, clearing the gradients) costs each "
             "framework on a batch of 32 SST-2 sentences. Ratio: Paddle's throughput over torch's (torch's seconds "
             "over Paddle's); in brackets the same from the fastest repeats. "
             "[bench_speed.md](bench_speed.md) has the full run's every shape, the eval forward and both "
             "reference BERTs.", "",
             "| shape | threads | clock | torch's AdamW | torch s | Paddle s | ratio (best) | optimizer s, torch / "
             "Paddle | measured |", "|---|---|---|---|---|---|---|---|---|", *rows, "",
             f"An eval forward at {shape([32, p50['seq']])}, the full run: torch {p50['torch_sent_per_s']:.1f}, "
             f"Paddle {p50['paddle_sent_per_s']:.1f} sentences/s ({p50['paddle_over_torch']:.2f}). Step 5 trains "
             "torch with its fused AdamW, whose step is about 3x faster than the multi-tensor one's; that moves "
             f"the ratio against Paddle. At one thread Paddle's `adamw_` is then the largest gap ({one[1]:.3f} s "
             f"against torch's {one[0]:.3f} s).", "", "Targets:", "",
             f"- Paddle against torch, at least {target}: **not met**. Two threads: train "
             f"{span(train)}, eval {span([x['paddle_over_torch'] for x in evals])} over the p25, p50 and p90 shapes "
             f"(the full run); {span(fused[:1])} with the fused AdamW. One thread: {span(fused[1:])} with the fused "
             f"AdamW, {span(cpu)} in process CPU time with the multi-tensor one.",
             f"- transformers' and paddlenlp's own BERTs are {span(ref)} apart too: the gap is the frameworks', "
             "not the port's.",
             f"- pt_bert against transformers, at least 1 within noise: {span(own['torch'])}, the same speed "
             "(met).",
             f"- pd_bert against paddlenlp, at least 1: {span(own['paddle'])}, pd_bert the faster (met).", ""]
    return lines + legend(data, report, [r["measured"] for r in data["step"]])


def profile(data: dict, report: dict) -> list:
    prof, grouped, outside = data["profile"], data["profile, grouped"], data["outside the kernels"]
    rows = [f"| {r['op']} | {r['paddle']} | " + " ".join(
        s for s in ((None if r["torch"] is None else f"{'~' if r.get('about') else ''}{r['torch']}"),
                    r["torch ops"] and f"({r['torch ops']})") if s) + " |" for r in prof["rows"]]
    slow = {r["op"]: r["paddle"] - r["torch"] for r in prof["rows"] if r["op"] in prof["single-threaded"]}
    gemm = prof["rows"][0]
    full = full_step(report, prof["shape"][1])
    gap = (full["paddle_s"]["median"] - full["torch_s"]["median"]) * 1000
    lines = ["## Where Paddle's time goes", "",
             f"Milliseconds per train step at {shape(prof['shape'])}, two threads; both sides with the stride flag, "
             "addmm Linear and the malloc setting, torch with its multi-tensor AdamW, each side its own dropout:", "",
             "| op | Paddle | torch |", "|---|---|---|", *rows, "",
             f"Paddle runs {', '.join(list(slow)[:-1])} and {list(slow)[-1]} in single-threaded CPU kernels where "
             "torch parallelizes them: "
             f"{sum(slow.values())} ms a step more than torch's, and its GEMMs {gemm['paddle'] - gemm['torch']} ms "
             f"more, of the {gap:.0f} ms between the full run's medians at this shape. None of these has a "
             "numerics-preserving alternative in Paddle's Python API: built from primitive ops (a PyLayer LayerNorm "
             "backward, say), each primitive is itself a single-threaded kernel, and the gradients round otherwise. "
             "What would close the gap: multi-threaded Paddle CPU kernels for layer_norm_grad, dropout and gelu (a "
             "custom C++ op), outside this project.", "",
             f"A length-grouped step at {shape(grouped['shape'])}, Paddle, one thread, ms per step:", "",
             "| op | Paddle | |", "|---|---|---|",
             *(f"| {r['op']} | {'~' if r.get('about') else ''}{r['paddle']} | {r['note'] or ''} |"
               for r in grouped["rows"]), "",
             "Outside the kernels, neither data nor dispatch is where the time goes:", "",
             "| | torch | Paddle | of a step |", "|---|---|---|---|",
             *(f"| {r['what']} | {r['torch']:g} {u} | {r['paddle']:g} {u} | {r['share']} |"
               for r, u in zip(outside["rows"], outside["units"])), "",
             "Step 5 tokenizes once, in encode(); the loaders only pad."]
    return lines + [""] + legend(data, report, [prof["measured"], grouped["measured"], outside["measured"]])


def used(r: dict) -> str:
    return ("yes" if r["used"] else "no") + (f": {r['why']}" if r.get("why") else "")


def levers(data: dict, report: dict) -> list:
    one, two, adamw = data["levers, one thread"], data["levers, two shapes"], data["adamw"]

    def change(pair):
        return f"{pair[0]:.3f} -> {pair[1]:.3f} s ({(pair[1] / pair[0] - 1) * 100:+.1f} %)"
    rows = []
    for r in one["rows"]:
        said = [f"train step {change(r['train'])}" if r["train"] else None,
                f"eval {change(r['eval'])}" if r["eval"] else None, r["effect"]]
        rows.append(f"| {r['lever']} | {r['where']} | {'; '.join(s for s in said if s)} | {used(r)} |")
    two_rows = [f"| {r['lever']} | " + (" | ".join(f"{c:+.1f} %" for c in r["change"]) if r["change"] else
                                        f"{r['said']} | ") + f" | {used(r)} |" for r in two["rows"]]
    pd = adamw["paddle"]
    lines = ["## Levers", "",
             "Each lever tried, its measured effect, and whether Step 5 runs with it.", "",
             f"On pd_bert's train step and eval forward at [32, 40]: process CPU seconds with one thread, "
             f"{one['baseline'][0]} / {one['baseline'][1]} s with none of them:", "",
             "| lever | where | measured effect | Step 5 |", "|---|---|---|---|", *rows, ""]
    lines += legend(data, report, [one["measured"]] + [i for r in one["rows"] for i in r["also measured"]])
    together = data["levers, together"]["rows"]
    lines += ["The three Step 5 uses together, on the twins' train step at p50 [32, 40], wall time with two "
              "threads:", "",
              "| levers | torch s | Paddle s | ratio | measured |", "|---|---|---|---|---|",
              *(f"| {r['levers']} | {t:.3f} | {p:.3f} | **{ratio(t, p):.2f}** | *{r['measured']}* |"
                for r, (t, p) in ((r, seconds(r, report)) for r in together)), ""]
    lines += legend(data, report, [r["measured"] for r in together])
    lines += [f"On Paddle's train step at {' and '.join(shape(s) for s in two['shapes'])} (a length-grouped "
              "batch), change of the median against the step without the lever:", "",
              f"| lever | {' | '.join(shape(s) for s in two['shapes'])} | Step 5 |", "|---|---|---|---|", *two_rows,
              "", f"Numerics: {two['numerics']}.", ""]
    lines += legend(data, report, [two["measured"]])
    lines += ["On the optimizer step, torch's AdamW over MiniLM's 22.7M parameters, ms a step:", "",
              "| implementation | one thread (CPU ms) | two threads (wall ms) |", "|---|---|---|",
              *(f"| {r['implementation']} | {r['one thread']} | {r['two threads'] or ''} |" for r in adamw["rows"]),
              "",
              "The fused kernel is the same formula in one pass over memory instead of several; Step 5 uses it "
              f"(twins/pt_optim.py). Paddle's `adamw_` over the same model: {pd['adamw_ one thread']} ms at one "
              f"thread, {pd['adamw_ two threads']} ms at two (its kernel is OpenMP-parallel). On the 11.7M-element "
              f"word-embedding tensor alone: `AdamW` {pd['embedding AdamW']} ms, `Adam` {pd['embedding Adam']} ms, "
              f"`Adam(use_multi_tensor=True)` (`merged_adam_`) {pd['embedding merged_adam_']} ms. Paddle 3.3.1's "
              "AdamW has no multi-tensor option, and `Adam(use_multi_tensor=True)` with the decoupled decay applied "
              "by hand is a different optimizer from the `paddle.optimizer.AdamW` a Paddle port uses: Steps 4 and 5 "
              "would prove a custom optimizer equal, not the user's. Step 5 does not use it.", ""]
    lines += legend(data, report, [adamw["measured"]])
    lines += ["What the levers Step 5 uses change in the numbers:", "", "| lever | result |", "|---|---|",
              *(f"| {r['lever']} | {r['result']} |" for r in data["numerics"]), ""]
    return lines + legend(data, report, ["numerics"])


def epoch(data: dict, report: dict) -> list:
    e, probe = data["epoch"], data["probe"]
    rows, together = [], {}
    for r in e["rows"]:
        both = max(r["torch"][0], r["paddle"][0]) if r["at once"] else r["torch"][0] + r["paddle"][0]
        target = e["targets"][r["order"]]
        together.setdefault(r["order"], []).append(both)
        rows.append(f"| {r['order']} | {r['dropout']} | {r['together']} | {r['torch adamw']} | "
                    f"{r['torch'][0]:.1f} min, {r['torch'][1]} | {r['paddle'][0]:.1f} min, {r['paddle'][1]} "
                    f"({r['paddle'][1] / r['torch'][1]:.2f}) | {both:.1f} min | "
                    + " / ".join(f"{r[k]} min" if r[k] else "-" for k in ("step 5", "run_all"))
                    + f" | {target} min: {'met' if both <= target else '**not met**'} | *{r['measured']}* |")
    steps = e["steps"]
    lines = ["## One SST-2 epoch, both frameworks", "",
             f"One epoch of Step 5's training ({steps:,} steps of 32, dynamic padding, a full dev evaluation) on "
             "each side; random batches (the guide's recipe) or `--group_by_length`; dropout masks shared "
             "(`--shared_dropout`) or each framework's own. Minutes of training and sentences/s; in brackets "
             "Paddle's over torch's.", "",
             "| batches | dropout | the two trainings | torch's AdamW | torch | Paddle | both trainings | Step 5 / "
             "run_all | target | measured |", "|---|---|---|---|---|---|---|---|---|---|", *rows, "",
             *(f"- Both trainings within {e['targets'][o]} min with {o} batches: **not met**, "
               f"{min(t):.1f} min at best." for o, t in together.items()
               if min(t) > e["targets"][o]),
             "",
             "Shared masks make Paddle's epoch faster, not slower: a numpy draw and one multiply replace Paddle's "
             f"dropout kernel ({next(r['paddle'] for r in data['profile']['rows'] if r['op'] == 'dropout mask')} "
             "ms a step in the profile above).", "",
             "Side by side or one after the other, a 120-step probe, sentences/s:", "",
             "| the two trainings | torch | Paddle | wall for both |", "|---|---|---|---|",
             *(f"| {r['how']} | {r['torch']} | {r['paddle']} | {r['wall']} |" for r in probe["rows"]), "",
             "Over a whole epoch the two processes slow each other more than in the probe: AdamW and the 47 MB "
             "embedding gradient stream through memory every step on both cores. Side by side still finishes "
             "Step 5 sooner, and every result is the same (see the numerics above).", ""]
    return lines + legend(data, report, [r["measured"] for r in e["rows"]] + [probe["measured"]])


def distance(data: dict, report: dict) -> list:
    f, peak, d = data["flops"], data["peak"], data["distance"]
    top = peak["cores"] * peak["ghz"] * peak["lanes"] * peak["fma pipes"] * 2
    pt, pd = peak["gemm"]["torch"], peak["gemm"]["paddle"]
    rows = [f"| {r['order']} | {r['padded']:,} | {r['padded'] / f['real tokens']:.2f}x | "
            + " | ".join("" if r[k] is None else f"{r[k]:g} TFLOP" for k in ("dense", "attention"))
            + f" | **{r['total']:g} TFLOP** |" for r in f["rows"]]
    far = [f"| {r['order']} | {r['side']} | {r['minutes']:.1f} min | {r['achieved']:g} GFLOP/s | {r['bound']:g} min "
           f"| {r['minutes'] / r['bound']:.2f}x |" for r in d["rows"]]
    grouped = {r["side"]: r["bound"] for r in d["rows"] if r["order"] == "grouped"}
    random = [r["bound"] for r in d["rows"] if r["order"] == "random"]
    lines = ["## The distance to the machine's limit", "",
             f"**FLOPs of one epoch.** Training costs 2 forward and 4 backward FLOPs per weight per token; "
             f"MiniLM's encoder has {f['dense weights']:,} dense weights, **{f['per padded token MFLOP']:.2f} MFLOP "
             f"per padded token**. Attention's QK^T and AV add {f['attention kFLOP per token per S']} kFLOP x S per "
             f"token over the 6 layers; pooler and head {f['head per sentence']} per sentence. Embedding lookups, "
             "biases, LayerNorm, GELU, softmax and dropout are left out; AdamW is "
             f"~{f['adamw per step GFLOP']} GFLOP a step, apart. The training set holds {f['real tokens']:,} "
             "real tokens.", "",
             "| epoch order | padded tokens | padding | dense | attention | total |", "|---|---|---|---|---|---|",
             *rows, "",
             f"**This CPU's peak:** {peak['cores']} cores x {peak['ghz']} GHz (nominal) x {peak['lanes']} fp32 lanes "
             f"(AVX2) x {peak['fma pipes']} FMA pipes x 2 FLOP = **{top:.1f} GFLOP/s**; the cores boost above the "
             f"nominal clock (one thread reached {peak['one thread']} GFLOP/s, more than {top / 2:.0f}). A 2048^3 "
             f"fp32 GEMM on two threads: **torch {pt}, Paddle {pd} GFLOP/s** ({pt / top:.0%}-{pd / top:.0%} of "
             "peak).", "",
             "| batches | side | measured | achieved | GEMM-bound (epoch FLOPs at its own GEMM rate) | distance |",
             "|---|---|---|---|---|---|", *far, "",
             f"No framework can train a random-batch epoch in under ~{min(random):.0f} min on this machine: a "
             f"40-minute target for both is out of reach by arithmetic, not by code. Length grouping removes "
             f"{f['rows'][0]['total'] / f['rows'][1]['total']:.1f}x of the work. A grouped step is short "
             f"([32, 12]: {d['grouped step GFLOP']} GFLOP; ~{d['grouped step seconds']['torch']} s torch, "
             f"~{d['grouped step seconds']['paddle']} s Paddle), so the work per step that does not shrink with the "
             "batch weighs more: AdamW over 22.7M parameters, zeroing and scattering the dense 47 MB embedding "
             "gradient, the per-op dispatch of ~600 ops. A grouped epoch sits further from its GEMM bound than a "
             "random one.", "",
             f"**Why 20 minutes is out of reach.** The grouped epoch's {f['rows'][1]['total']:g} TFLOP at one "
             f"core's GEMM rate (~{d['one core GEMM']} GFLOP/s) alone take {d['one core epoch minutes']} min per "
             f"framework; Paddle's AdamW adds {e_steps(data):,} x {d['paddle adamw seconds']} s = "
             f"{e_steps(data) * d['paddle adamw seconds'] / 60:.1f} min, LayerNorm, gelu, the adds and softmax "
             f"~{d['elementwise minutes']} min: ~{d['paddle side minutes']} min for Paddle's side with nothing wasted. "
             f"One after the other on two threads, the GEMM-bound times are {grouped['torch']:g} + "
             f"{grouped['Paddle']:g} = {grouped['torch'] + grouped['Paddle']:.1f} min before any AdamW or "
             "elementwise work. Both ways, the fixed work per step (Paddle's AdamW above all, which has no faster "
             "form that is still `paddle.optimizer.AdamW`) keeps the two trainings above 20 min. The levers left "
             "for that work change the numbers: a sparse or row-wise embedding update changes AdamW's math for "
             "the untouched rows, not an option for an alignment tool.", ""]
    return lines + legend(data, report, [f["measured"], peak["measured"], *d["measured"]])


def e_steps(data: dict) -> int:
    return data["epoch"]["steps"]


def reading(data: dict, report: dict) -> list:
    r = data["reading"]
    lt, lp = r["loaded p50 train"]["torch"], r["loaded p50 train"]["paddle"]
    lines = ["## How to read timings on a shared machine", "",
             "With `OMP_NUM_THREADS=2` every parallel region waits for both threads; while another job holds one "
             "core, each such region costs a scheduler time slice. torch parallelizes every elementwise op, so it "
             f"suffers most: its 2-D add of 2M floats takes {r['add 2M floats ms'][0]} ms on a quiet machine and a "
             f"flat {r['add 2M floats ms'][1]} ms on a loaded one. On a loaded machine pt_bert's p50 train step "
             f"had a median of {lt[0]} s [{lt[1]}-{lt[2]}] where pd_bert's had {lp[0]} s [{lp[1]}-{lp[2]}], a "
             f"meaningless \"ratio\" of {lt[0] / lp[0]:.1f}: Paddle's non-GEMM kernels are single-threaded and "
             "barely notice. So:", "",
             "- compare only numbers taken in the same run, the two frameworks interleaved "
             "(`tools/bench_speed.py` does), and look at the load its page states and at the `best` column, the "
             "ratio of the fastest repeats;",
             f"- to rank levers, use process CPU time with one thread (`OMP_NUM_THREADS=1`, `time.process_time`), "
             f"stable to {r['cpu time spread']}, the variants interleaved in one process; a "
             "ratio to quote is wall time with two threads on a quiet machine;",
             "- `python tools/bench_speed.py --threads 1`, `--env-paddle KEY=VALUE` and `--env-torch KEY=VALUE` "
             "switch a lever without touching code.", ""]
    return lines + legend(data, report, r["measured"])


def configuration() -> list:
    return ["## How Step 5 gets its fast configuration", "",
            "No change to bert_sst2/twins/train.py or pipeline/Step5/ is needed:", "",
            "- `import portcheck.core.runtime`, first in every entry script, sets glibc malloc's thresholds "
            "(`keep_large_blocks`) for both frameworks;",
            "- bert_sst2/twins/pd_backend.py sets `FLAGS_use_stride_kernel=0` in Step 5's Paddle process, which runs "
            "pd_bert alone. A Paddle flag holds for the whole process and this one changes what `Tensor.view` returns, "
            "so the library sets none;",
            "- models/pd_bert.py's `Linear` is one `paddle.addmm` on the 2-D view;",
            "- twins/pt_optim.py builds torch's AdamW with `fused=True`;",
            "- `pipeline/run_all.py` runs the two trainings side by side, one core each, with two or more cores "
            "(`--one_at_a_time`: one after the other, each on every core);",
            "- `--group_by_length` (the name Hugging Face's TrainingArguments uses) and `--shared_dropout` are "
            "opt-in flags of both training scripts; the reference run uses both.", ""]


def render(data: dict, report: dict) -> str:
    """The page, from speed.json and bench_speed.json alone."""
    s = data["setup"]
    lines = ["# Training speed: Paddle against torch on CPU", "",
             bench_doc.header(bench_speed.facts(report), report["command"]), "",
             "That run gives the headline step below. Under each table, each of its measurements with its method, "
             f"command, date, CPU and load as recorded with it (\"{NONE}\" where they were not). "
             "`python tools/bench_profile.py --page` writes this page from docs/bench/speed.json and "
             "docs/bench/bench_speed.json.", "",
             f"Machine: {s['machine']}. Software: {s['software']}. Model: {s['model']}.", ""]
    for part in (step, profile, levers, epoch, distance, reading):
        lines += part(data, report)
    lines += configuration()
    return "\n".join(lines[:-1]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "speed.md",
                    help=f"the page; speed.json and {SPEED}.json beside it")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    if not args.page:
        raise PipelineError(f"the figures were measured by hand, each with the method it names: record a new one in "
                            f"{args.out.with_suffix('.json').name} (or run python tools/bench_speed.py), then write "
                            "the page with --page")
    data = json.loads(require(args.out.with_suffix(".json"), "record the figures in speed.json").read_text())
    report = json.loads(require(args.out.parent / f"{SPEED}.json", "python tools/bench_speed.py").read_text())
    same_run(data, report)
    bench_doc.write(args.out, render(data, report))


if __name__ == "__main__":
    run_main(main)
