"""Isolated judgement measured (portcheck/isolate.py, compare_backward(isolate=True)): how much of its allowance a
clean port uses when every module, or every optimizer step, is judged on torch's own values, what a planted
bug uses, and what isolation costs.

    python tools/bench_isolate.py          # writes docs/bench/isolate.md and its figures, isolate.json (~2 minutes)
    python tools/bench_isolate.py --page   # the page again from isolate.json, nothing measured

Forward (eval mode, no name map: modules paired by portcheck.mapping.pairing), the largest max diff / allowance over
every row, the ordinary (cumulative) run's and the isolated run's (K = 16 both): transformers' ResNet-18 against
paddle.vision's (examples/resnet18), transformers' BertModel against paddlenlp's and transformers'
LlamaForCausalLM against paddlenlp's (tiny sizes, random weights). Time: compare_forward with and without
isolate=True, best of 5, alternated, on the ResNet.
Training, the largest over every key after the steps, cumulative (K_BACKWARD) and isolated (K_STEP): the ResNet
example's 5 steps, and 2 steps of momentum SGD on a MobileNetV1-like pair (depthwise-separable blocks), clean
and with Paddle's weight decay ten times torch's.
"""
import argparse
import copy
import json
import time

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from pathlib import Path

import numpy as np

from bert_sst2 import paths
from portcheck.core import calibrated
from portcheck.core.errors import run_main
from tools import bench_doc

COMMAND = "python tools/bench_isolate.py"


def usage(rows) -> str:
    rows = [r for r in rows if not r.problem and r.allowed > 0]
    worst = max(rows, key=lambda r: r.max / r.allowed)
    return f"{worst.max / worst.allowed:.3f} ({worst.name})"


def figures(row: tuple) -> dict:
    """A table row as data (docs/bench/isolate.json, which the docs' figures are tested against)."""
    keys = ("cumulative", "isolated", "seconds", "seconds_isolated")
    return {k: v.split(" (")[0] for k, v in zip(keys, row[1:]) if v != "-"}


def resnet():
    import paddle
    from portcheck import convert
    from examples.resnet18 import resnet as example
    pt = example.new_torch_model().eval()
    pd = paddle.vision.models.resnet18(num_classes=example.CLASSES).eval()
    x = example.random_batch(2)[0]
    pd.set_state_dict(convert(pt, pd, inputs=x))
    return pt, pd, x


def bert():
    import paddle  # noqa: F401
    import torch
    from paddlenlp.transformers import BertConfig as PaddleConfig, BertModel as PaddleBert
    from transformers import BertConfig, BertModel
    from portcheck import convert
    sizes = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 max_position_embeddings=64)
    torch.manual_seed(0)
    pt = BertModel(BertConfig(**sizes, attn_implementation="eager")).eval()
    pd = PaddleBert(PaddleConfig(**sizes, type_vocab_size=2)).eval()
    ids = {"input_ids": np.random.RandomState(0).randint(1, 100, (2, 16)).astype("int64")}
    pd.set_state_dict(convert(pt, pd, inputs=ids))
    return pt, pd, ids


def llama():
    import torch
    from paddlenlp.transformers import LlamaConfig as PaddleConfig, LlamaForCausalLM as PaddleLlama
    from transformers import LlamaConfig, LlamaForCausalLM
    from portcheck import convert
    sizes = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
    torch.manual_seed(0)
    pt = LlamaForCausalLM(LlamaConfig(**sizes, attn_implementation="eager")).eval()
    pd = PaddleLlama(PaddleConfig(**sizes)).eval()
    ids = {"input_ids": np.random.RandomState(0).randint(1, 64, (2, 16)).astype("int64")}
    pd.set_state_dict(convert(pt, pd, layouts={"LlamaLMHead": "transpose"}, inputs=ids))
    return pt, pd, ids


def best(fn, n=3) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def forward_row(name, build, timed=False):
    """timed: the comparison's time too (on a tiny pair it is milliseconds of fixed cost, not worth a figure)."""
    from portcheck import compare_forward
    pt, pd, x = build()
    report = compare_forward(pt, pd, x, isolate=True)
    assert report.passed, report.table()
    if not timed:
        return (name, usage(report.rows), usage(report.isolated), "-", "-")
    # the two timed alternately, best of 5 each, so a burst of other work on the machine costs both alike
    plain, isolated = [], []
    for _ in range(5):
        plain.append(best(lambda: compare_forward(pt, pd, x), 1))
        isolated.append(best(lambda: compare_forward(pt, pd, x, isolate=True), 1))
    plain, isolated = min(plain), min(isolated)
    return (name, usage(report.rows), usage(report.isolated), f"{plain:.2f}", f"{isolated:.2f}")


def mobilenet_like(seed=0):
    """MobileNetV1's shape at a small size: a strided conv, then depthwise-separable blocks, BatchNorm and ReLU."""
    import paddle
    import torch
    from portcheck import convert

    def layers(nn, conv, bn):
        out = [conv(3, 8, 3, 2, 1), bn(8), nn.ReLU()]
        for cin, cout, stride in ((8, 16, 1), (16, 32, 2), (32, 32, 1)):
            out += [conv(cin, cin, 3, stride, 1, groups=cin), bn(cin), nn.ReLU(), conv(cin, cout, 1), bn(cout), nn.ReLU()]
        return out
    torch.manual_seed(seed)
    pt = torch.nn.Sequential(*layers(torch.nn, lambda *a, **k: torch.nn.Conv2d(*a, **k, bias=False),
                                     torch.nn.BatchNorm2d), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                             torch.nn.Linear(32, 5))
    pd = paddle.nn.Sequential(*layers(paddle.nn, lambda *a, **k: paddle.nn.Conv2D(*a, **k, bias_attr=False),
                                      paddle.nn.BatchNorm2D), paddle.nn.AdaptiveAvgPool2D(1), paddle.nn.Flatten(),
                              paddle.nn.Linear(32, 5))
    rng = np.random.RandomState(seed)
    x, y = rng.randn(8, 3, 16, 16).astype("float32"), rng.randint(0, 5, 8).astype("int64")
    pd.set_state_dict(convert(pt, pd, inputs=x))
    return pt.train(), pd.train(), x, y


def mobilenet_rows(seeds=3):
    import paddle
    import torch
    from portcheck import compare_backward
    rows = []
    for decay in (1e-4, 1e-3):
        cells = []
        for isolate in (False, True):
            figures = []
            for seed in range(seeds):
                report = compare_backward(
                    *mobilenet_like(seed), loss=(torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy),
                    optimizer=(lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4),
                               lambda ps: paddle.optimizer.Momentum(learning_rate=0.05, momentum=0.9, parameters=ps,
                                                                    weight_decay=paddle.regularizer.L2Decay(decay))),
                    steps=2, isolate=isolate)
                figures.append(max(r.max / r.allowed for rows_ in report.steps for r in rows_
                                   if not r.problem and r.allowed > 0))
            cells.append(f"{min(figures):.3f} - {max(figures):.3f}")
        rows.append((f"MobileNetV1-like, Paddle weight decay {decay:g} (torch 1e-4), seeds 0-{seeds - 1}", *cells))
    return rows


def resnet_training_row():
    import paddle
    from portcheck import compare_backward, convert
    from examples.resnet18 import resnet as ex
    pt = ex.new_torch_model()
    pd = paddle.vision.models.resnet18(num_classes=ex.CLASSES)
    x, y = ex.random_batch(2)
    pd.set_state_dict(convert(pt, pd, inputs=x))
    (t_loss, t_opt, t_sched), (p_loss, p_opt, p_sched) = ex.torch_training(), ex.paddle_training()
    cells = []
    for isolate in (False, True):
        report = compare_backward(copy.deepcopy(pt).train(), copy.deepcopy(pd).train(), x, y, loss=(t_loss, p_loss),
                                  optimizer=(t_opt, p_opt), scheduler=(t_sched, p_sched), steps=ex.STEPS,
                                  isolate=isolate)
        assert report.passed, report.table()
        cells.append(usage([r for rows in report.steps for r in rows]))
    return ("ResNet-18 example, 5 steps, clean", *cells)


def render(data: dict) -> str:
    """The page, from the JSON (docs/bench/isolate.json) alone."""
    lines = ["# Isolated judgement, measured", "", bench_doc.header(data.get(bench_doc.RUN), COMMAND), "",
             "No name map anywhere.", "",
             f"Forward, clean ports: the largest max diff / allowance (K = {data['K']:g}) over every row, and "
             "compare_forward's time in seconds at the ResNet example's batch (best of 5, the two alternated):", "",
             "| pair | cumulative | isolated | time | time isolated |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in data["rows"]["forward"]]
    lines += ["", f"Training: the largest max diff / allowance over every key after the steps, cumulative (K_BACKWARD "
              f"= {data['K_BACKWARD']:g}) and isolated (each step from torch's weights, K_STEP = "
              f"{data['K_STEP']:g}):", "", "| pair | cumulative | isolated |", "|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in data["rows"]["training"]]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "isolate.md",
                    help="the page (Markdown); its figures go beside it as .json")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    out = args.out
    if args.page:
        bench_doc.rewrite(out, out.with_suffix(".json"), render, COMMAND)
        return
    run = bench_doc.start()
    forward = [forward_row("transformers ResNet-18 vs paddle.vision", resnet, timed=True),
               forward_row("transformers BertModel vs paddlenlp (tiny)", bert),
               forward_row("transformers Llama vs paddlenlp (tiny)", llama)]
    training = [resnet_training_row(), *mobilenet_rows()]
    data = {"forward": {r[0]: figures(r) for r in forward}, "training": {r[0]: figures(r) for r in training},
            "rows": {"forward": [list(r) for r in forward], "training": [list(r) for r in training]},
            "K": calibrated.K, "K_BACKWARD": calibrated.K_BACKWARD, "K_STEP": calibrated.K_STEP,
            bench_doc.RUN: bench_doc.finish(run)}
    text = render(data)
    print(text)
    bench_doc.write(out.with_suffix(".json"), json.dumps(data, indent=1) + "\n")
    bench_doc.write(out, text)


if __name__ == "__main__":
    run_main(main)
