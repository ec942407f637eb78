"""Step 3, torch side: cross-entropy of pt_bert's logits on the fake batch -> loss_torch.npy."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import common  # noqa: E402,F401  (first: offline mode and thread settings, before torch/paddle load)
import torch  # noqa: E402
from reprod_log import ReprodLogger  # noqa: E402

from common import inputs, paths  # noqa: E402
from common.diff import save_npy  # noqa: E402
from common.weights import torch_model  # noqa: E402


def main():
    model = torch_model()
    model.eval()  # dropout off: the two frameworks draw different masks
    ids, labels = (torch.from_numpy(a) for a in inputs.fake_batch())
    criterion = torch.nn.CrossEntropyLoss()  # classes on dim 1 of [batch, classes], mean over the batch
    with torch.no_grad():
        loss = criterion(model(ids), labels)
    logger = ReprodLogger()
    # torch and Paddle 3 give a 0-d loss, Paddle before 2.5 [1]: both sides save [1], on purpose
    logger.add("loss", loss.numpy().reshape(1))
    out = paths.step_dir(3) / "loss_torch.npy"
    save_npy(out, logger.data)
    print(f"wrote {out}: loss {loss.item():.8f}")


if __name__ == "__main__":
    paths.run_main(main)
