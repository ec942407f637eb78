import paddle

"""pt_mlp.py as PaConvert 3.3.1 writes it (paconvert --in_dir pt_mlp.py --out_dir pd_mlp.py, 100% converted, no >>>>>> line): every torch.nn.Linear a paddle.compat.nn.Linear, holding torch's [out, in]."""
import argparse

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()


class MLP(paddle.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = paddle.compat.nn.Linear(8, 12)
        self.fc2 = paddle.compat.nn.Linear(12, 12)
        self.head = paddle.compat.nn.Linear(12, 3)

    def forward(self, x):
        return self.head(paddle.tanh(self.fc2(paddle.tanh(self.fc1(x)))))


paddle.manual_seed(0)
model = MLP()
opt = paddle.optimizer.SGD(
    parameters=model.parameters(), learning_rate=0.1, weight_decay=0.0
)
rng = np.random.default_rng(0)
for step in range(args.steps):
    x = paddle.from_numpy(rng.standard_normal((4, 8)).astype("float32"))
    y = paddle.from_numpy(rng.integers(0, 3, (4,)))
    loss = paddle.nn.functional.cross_entropy(input=model(x), label=y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
