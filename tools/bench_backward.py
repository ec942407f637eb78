"""What one compare_backward call costs at the smallest size (issue 65 item 7): 2 steps of momentum SGD on the tiny
twin BERTs (models/, tests/tiny_config.json: 2 layers, hidden 32; 2 x 16 tokens, eval mode), against its method's
floor: the same 2 steps as plain loops, torch's in float32, in float64 (its own error) and with the other thread
count (torch against itself, against_itself.other_threads), and Paddle's. The rest of a call is the library's
own work: hooks, copies to numpy, pairing, judging every row.

    OMP_NUM_THREADS=1 nice -n 10 python tools/bench_backward.py --calls 7

Times are CPU seconds (the process's, every thread's): other work may load the machine, and a wall clock then
measures the load. Each figure is the median of --calls calls after a warm-up; the floors are measured beside each
call, under the same load.
"""
import argparse
import copy
import statistics
import time

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

import numpy as np

from bert_sst2 import paths
from portcheck.core.errors import run_main

STEPS = 2


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--calls", type=int, default=7, help="calls measured after a warm-up, the median taken (default 7)")
    args = ap.parse_args()
    if args.calls < 1:
        raise SystemExit("error: --calls must be >= 1")
    from portcheck import compare_backward
    pt, pd, ids, labels = pair()
    loss, optimizer = training()
    figures = {}
    for i in range(args.calls + 1):
        t, p = copy.deepcopy(pt), copy.deepcopy(pd)
        start = time.process_time()
        compare_backward(t, p, ids, labels, loss=loss, optimizer=optimizer, steps=STEPS)
        call = time.process_time() - start
        plain = floors(pt, pd, ids, labels)
        if i:  # the first: the warm-up (the frameworks' first kernels, the library's lazy imports)
            for name, seconds in {"compare_backward": call, **plain, "method": sum(plain.values()),
                                  "the rest (the library's own work)": call - sum(plain.values())}.items():
                figures.setdefault(name, []).append(seconds)
    print(f"CPU seconds, median of {args.calls} calls ({STEPS} steps of momentum SGD, tiny twin BERTs):")
    for name, seconds in figures.items():
        print(f"  {statistics.median(seconds):6.3f}  {name}  ({min(seconds):.3f} - {max(seconds):.3f})")


if __name__ == "__main__":
    run_main(main)
