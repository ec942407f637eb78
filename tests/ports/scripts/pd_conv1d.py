"""pt_conv1d.py's Paddle port: each Conv1D a paddle.compat.nn.Linear (torch's [out, in] weight), as a port through
PaConvert's Linear writes it."""
import argparse

import numpy as np
import paddle

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()


class MLP(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.c_fc = paddle.compat.nn.Linear(8, 12)
        self.c_sq = paddle.compat.nn.Linear(12, 12)
        self.c_proj = paddle.compat.nn.Linear(12, 3)

    def forward(self, x):
        return self.c_proj(paddle.tanh(self.c_sq(paddle.tanh(self.c_fc(x)))))


paddle.seed(0)
model = MLP()
opt = paddle.optimizer.SGD(parameters=model.parameters(), learning_rate=0.1)
rng = np.random.default_rng(0)
for step in range(args.steps):
    x = paddle.to_tensor(rng.standard_normal((4, 8)).astype("float32"))
    y = paddle.to_tensor(rng.integers(0, 3, (4,)))
    loss = paddle.nn.functional.cross_entropy(model(x), y)
    opt.clear_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
