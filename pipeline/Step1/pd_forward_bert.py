"""Step 1, Paddle side: logits of pd_bert on the fake batch and on a real padded batch."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
import paddle  # noqa: E402
from reprod_log import ReprodLogger  # noqa: E402

from common import diagnose, inputs, paths  # noqa: E402
from common.diff import save_npy  # noqa: E402
from common.weights import paddle_model  # noqa: E402


def main():
    model = paddle_model()
    model.eval()  # dropout off: the two frameworks draw different masks
    fake_ids, _ = inputs.fake_batch()
    padded = {k: paddle.to_tensor(v) for k, v in inputs.padded_batch().items()}
    # every watched module's output, in run order, for check_step1's layer-by-layer diagnosis
    modules, tag = {}, ["fake"]
    for name, module in diagnose.watched(model.named_sublayers()):
        module.register_forward_post_hook(lambda m, i, out, name=name: modules.__setitem__(f"{tag[0]}/{name}", out.numpy()))
    logger = ReprodLogger()
    with paddle.no_grad():
        logger.add("logits_fake", model(paddle.to_tensor(fake_ids)).numpy())
        tag[0] = "padded"
        logger.add("logits_padded", model(**padded).numpy())
    out = paths.step_dir(1) / "forward_paddle.npy"
    save_npy(out, logger.data)
    save_npy(out.with_name("forward_modules_paddle.npy"), modules)
    print(f"wrote {out}")


if __name__ == "__main__":
    paths.run_main(main)
