"""Step 4, Paddle side: AdamW steps on the fake batch -> bp_align_paddle.npy.

Saves the loss of every iteration (loss_00 is before any update), every parameter's
gradient after the first backward as grad_<parameter name> (Linear weight gradients
transposed to torch's [out, in] layout), and what the optimizer did to each
parameter over all iterations as update_<parameter name>.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np
import paddle

from bert_sst2 import flags, hparams, inputs, keys, paths
from bert_sst2.twins import pd_optim
from bert_sst2.twins.weights import paddle_fingerprint, paddle_linear_weights, paddle_model
from portcheck.core import record
from portcheck.core.errors import run_main


def main():
    ap = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--lr", type=float, default=hparams.LEARNING_RATE, help="constant: no schedule")
    ap.add_argument("--float64", action="store_true", help="model and optimizer in float64 (a diagnostic: "
                    "the fp32 drift between the sides should then vanish if only rounding differs)")
    args = ap.parse_args()
    flags.check(("--iters", args.iters, flags.Whole(1)), ("--lr", args.lr, flags.LR))
    model = paddle_model()
    weights = paddle_fingerprint(model)  # as loaded, before anything runs
    model.eval()  # dropout off: the two frameworks draw different masks
    if args.float64:
        model.to(dtype="float64")
    ids, labels = (paddle.to_tensor(a) for a in inputs.fake_batch())
    optimizer, _ = pd_optim.build(model, args.lr)  # weight decay except bias/LayerNorm, eps from hparams
    criterion = paddle.nn.CrossEntropyLoss()
    transposed = paddle_linear_weights(model)
    start = {name: p.numpy().copy() for name, p in model.named_parameters()}
    results = {}
    for i in range(args.iters):
        loss = criterion(model(ids), labels)
        loss.backward()
        results[keys.STEP_LOSS.key(i)] = loss.detach().numpy().reshape(1)  # [1] on both sides, as in Step 3
        if i == 0:
            for name, p in model.named_parameters():
                if p.grad is not None:  # one without a gradient shows as a missing key in the check
                    g = p.grad.numpy()
                    results[keys.GRAD.key(name)] = g.T.copy() if name in transposed else g.copy()
        optimizer.step()
        optimizer.clear_grad()
    for name, p in model.named_parameters():
        # mean and mean |.| of each parameter's total update: averaging over the tensor cancels the
        # fp32 rounding of single weights, so even weight decay's lr * 0.01 * w per step shows;
        # the layout does not matter here, so no transpose
        moved = p.numpy().astype(np.float64) - start[name]
        results[keys.UPDATE.key(name)] = np.array([moved.mean(), np.abs(moved).mean()])
    # the long form, not Side.backward: this pair is every parameter's gradient by name (grad_*), each one's update
    # digest and each iteration's loss, held per family to BERT's tolerances; Side's is handin.bp_align's digests
    out = paths.step_dir(4) / "bp_align_paddle.npy"
    record.save_results({out: results}, "paddle", "pipeline/Step4/pd_bp.py", {"weights": weights, "inputs": record.fingerprint(zip(("ids", "labels"), inputs.fake_batch())),
                "flags": {"iters": args.iters, "lr": args.lr, "float64": args.float64}})
    print(f"wrote {out}: loss {results[keys.STEP_LOSS.key(0)][0]:.8f} -> {loss.item():.8f} in {args.iters} iterations")


if __name__ == "__main__":
    run_main(main)
