"""Step 1, Paddle side: logits of pd_bert on the fake batch and on a real padded batch."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
import paddle  # noqa: E402
from reprod_log import ReprodLogger  # noqa: E402

from common import inputs, paths  # noqa: E402
from common.diff import save_npy  # noqa: E402
from common.weights import paddle_model  # noqa: E402


def main():
    model = paddle_model()
    model.eval()  # dropout off: the two frameworks draw different masks
    fake_ids, _ = inputs.fake_batch()
    padded = {k: paddle.to_tensor(v) for k, v in inputs.padded_batch().items()}
    logger = ReprodLogger()
    with paddle.no_grad():
        logger.add("logits_fake", model(paddle.to_tensor(fake_ids)).numpy())
        logger.add("logits_padded", model(**padded).numpy())
    out = paths.step_dir(1) / "forward_paddle.npy"
    save_npy(out, logger.data)
    print(f"wrote {out}")


if __name__ == "__main__":
    paths.run_main(main)
