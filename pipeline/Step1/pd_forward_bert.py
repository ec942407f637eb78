"""Step 1, Paddle side: logits of pd_bert on the fake batch and on a real padded batch."""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import paddle

from bert_sst2 import diagnose, inputs, paths
from bert_sst2.twins.weights import paddle_fingerprint, paddle_model
from portcheck.core import record
from portcheck.core.errors import run_main


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False).parse_args()
    model = paddle_model()
    weights = paddle_fingerprint(model)  # as loaded, before anything runs
    model.eval()  # dropout off: the two frameworks draw different masks
    fake_ids, _ = inputs.fake_batch()
    padded = {k: paddle.to_tensor(v) for k, v in inputs.padded_batch().items()}
    # every watched module's output, in run order, for check_step1's layer-by-layer diagnosis
    modules, tag = {}, ["fake"]
    for name, module in diagnose.watched(model.named_sublayers()):
        module.register_forward_post_hook(lambda m, i, out, name=name: modules.__setitem__(f"{tag[0]}/{name}", out.numpy()))
    results = {}
    with paddle.no_grad():
        results["logits_fake"] = model(paddle.to_tensor(fake_ids)).numpy()
        tag[0] = "padded"
        results["logits_padded"] = model(**padded).numpy()
    # the long form, not portcheck.Side: this pair is two batches' logits (logits_fake, logits_padded), beside the
    # watched modules' outputs, each held to BERT's tuned tolerances (check_step1.py); Side's is one input's logits
    out = paths.step_dir(1) / "forward_paddle.npy"
    depends = {"weights": weights, "inputs": record.fingerprint([("fake_ids", fake_ids), *inputs.padded_batch().items()])}
    record.save_results({out: results, out.with_name("forward_modules_paddle.npy"): modules}, "paddle",
                        "pipeline/Step1/pd_forward_bert.py", depends)
    print(f"wrote {out}")


if __name__ == "__main__":
    run_main(main)
