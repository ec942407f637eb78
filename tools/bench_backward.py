"""What one compare_backward call costs at the smallest size: 2 steps of momentum SGD on the tiny twin BERTs
(models/, tests/tiny_config.json: 2 layers, hidden 32; 2 x 16 tokens, eval mode), against its method's floor: the
same 2 steps as plain loops, torch's in float32, in float64 (its own error) and with the other thread count (torch
against itself, against_itself.other_threads), and Paddle's. The rest of a call is the library's own work: hooks,
copies to numpy, pairing, judging every row.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE nice -n 10 python tools/bench_backward.py --calls 5
    python tools/bench_backward.py --page     # docs/bench/backward.md again from backward.json, nothing measured

Times are CPU seconds (the process's, every thread's): other work may load the machine, and a wall clock then
measures the load. Each figure is the median of --calls calls after a warm-up; the floors are measured beside each
call, under the same load. The figures go to docs/bench/backward.json, the page (backward.md) is written from it.
"""
import argparse
import copy
import json
import statistics
import time
from pathlib import Path

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

import numpy as np

from bert_sst2 import paths
from portcheck.core.errors import run_main
from tools import bench_doc

STEPS = 2
COMMAND = "python tools/bench_backward.py"
ENV = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")  # what the figures depend on beyond the arguments (said in the command)
CALL, METHOD, REST = "compare_backward", "the method's plain runs", "the rest (the library's own work)"


def pair():
    import torch
    from portcheck import convert
    from models import pd_bert, pt_bert
    from models.configuration_bert import BertConfig
    torch.manual_seed(0)
    config = BertConfig.from_json(paths.ROOT / "tests" / "tiny_config.json")
    config.num_labels = 2
    pt = pt_bert.BertForSequenceClassification(config).eval()
    pd = pd_bert.BertForSequenceClassification(config).eval()
    pd.set_state_dict(convert(pt, pd))
    ids = np.random.RandomState(0).randint(1, config.vocab_size, (2, 16)).astype("int64")
    return pt, pd, ids, np.array([0, 1])


def training():
    import paddle
    import torch
    return ((torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy),
            (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
             lambda ps: paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=ps)))


def floors(pt, pd, ids, labels) -> dict:
    """CPU seconds of each plain run the method makes (STEPS steps each)."""
    import paddle
    import torch
    from portcheck.gradients.against_itself import other_threads
    (t_loss, p_loss), (t_opt, p_opt) = training()

    def torch_run(model):
        opt = t_opt(model.parameters())
        for _ in range(STEPS):
            t_loss(model(torch.from_numpy(ids)), torch.from_numpy(labels)).backward()
            opt.step()
            opt.zero_grad()

    def paddle_run(model):
        opt = p_opt(model.parameters())
        for _ in range(STEPS):
            p_loss(model(paddle.to_tensor(ids)), paddle.to_tensor(labels)).backward()
            opt.step()
            opt.clear_grad()

    def against_itself(model):
        with other_threads():
            torch_run(model)
    runs = {"torch float32": (torch_run, lambda: copy.deepcopy(pt)),
            "torch float64 (its own error)": (torch_run, lambda: copy.deepcopy(pt).double()),
            "torch against itself (other threads)": (against_itself, lambda: copy.deepcopy(pt)),
            "Paddle": (paddle_run, lambda: copy.deepcopy(pd))}
    out = {}
    for name, (run, model) in runs.items():
        model = model()
        start = time.process_time()
        run(model)
        out[name] = time.process_time() - start
    return out


def first_optimizer() -> float:
    """CPU seconds of the process's first torch optimizer (it imports torch._dynamo, as any torch training script's
    first optimizer does): made before the first call, which then pays none of it."""
    import torch
    start = time.process_time()
    torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    return time.process_time() - start


def measure(calls: int) -> dict:
    from portcheck import compare_backward
    pt, pd, ids, labels = pair()
    loss, optimizer = training()
    figures, optimizer_first = {}, first_optimizer()
    for i in range(calls + 1):
        t, p = copy.deepcopy(pt), copy.deepcopy(pd)
        start = time.process_time()
        compare_backward(t, p, ids, labels, loss=loss, optimizer=optimizer, steps=STEPS)
        call = time.process_time() - start
        plain = floors(pt, pd, ids, labels)
        if not i:  # the warm-up: the frameworks' first kernels, the library's lazy imports
            first = call
            continue
        for name, seconds in {CALL: call, **plain, METHOD: sum(plain.values()), REST: call - sum(plain.values())
                              }.items():
            figures.setdefault(name, []).append(seconds)
    return {"steps": STEPS, "calls": calls, "first call": round(first, 3),
            "first optimizer": round(optimizer_first, 3),
            "cpu seconds": {name: {"median": round(statistics.median(v), 3), "min": round(min(v), 3),
                                   "max": round(max(v), 3)} for name, v in figures.items()}}


def render(result: dict) -> str:
    """The page (docs/bench/backward.md), from the JSON beside it alone."""
    cpu = result["cpu seconds"]
    lines = ["# compare_backward at the smallest size", "", bench_doc.header(result.get(bench_doc.RUN), COMMAND), "",
             f"{result['steps']} steps of momentum SGD on the tiny twin BERTs (2 layers, hidden 32, 2 x 16 tokens, "
             "eval mode). CPU seconds, the process's (every thread's), each the median of "
             f"{result['calls']} calls after a warm-up, the method's plain runs measured beside each call.", "",
             "| | CPU seconds (median) | lowest - highest |", "|---|---|---|"]
    for name, f in cpu.items():
        label = f"**{name}**" if name in (CALL, METHOD, REST) else f"plain run: {name}"
        lines.append(f"| {label} | {f['median']:.3f} | {f['min']:.3f} - {f['max']:.3f} |")
    lines += ["", f"A process's first call took {result['first call']:.2f} s of CPU. Its first torch optimizer, "
              f"built before it, took {result['first optimizer']:.2f} s more: it imports `torch._dynamo`, as any "
              "torch training script's first optimizer does.", "",
              "Why `OMP_WAIT_POLICY=PASSIVE`: torch's run against itself takes 2 threads where the other runs take "
              "1. At each of its barriers libgomp's waiting thread spins while the other waits for a core, so on a "
              "loaded machine that run's CPU seconds measure the load. The run against itself is the method "
              "(`calibrated.SPREAD`'s yardstick)."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--calls", type=int, default=7, help="calls measured after a warm-up, the median taken (default 7)")
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "backward.md", help="the page; its .json beside it")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    json_path = args.out.with_suffix(".json")
    if args.page:
        bench_doc.rewrite(args.out, json_path, render, COMMAND)
        return
    if args.calls < 1:
        raise SystemExit("error: --calls must be >= 1")
    facts = bench_doc.start(env=ENV)
    result = {**measure(args.calls), bench_doc.RUN: bench_doc.finish(facts)}
    bench_doc.write(json_path, json.dumps(result, indent=1) + "\n")
    bench_doc.write(args.out, render(result))
    print(render(result))


if __name__ == "__main__":
    run_main(main)
