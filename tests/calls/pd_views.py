"""pt_views.py's Paddle port: two views, an auxiliary loss, a dict and a temperature, a frozen first layer, two
optimizers, an evaluation before training."""
import argparse

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--aux", type=float, default=0.5, help="weight of the reconstruction loss")
parser.add_argument("--temperature", type=float, default=2.0)
args = parser.parse_args()


class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.mid = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)
        self.decode = nn.Linear(16, 8)

    def forward(self, batch, temperature):
        h = paddle.tanh(self.mid(paddle.tanh(self.embed(batch["x"]))))
        return self.head(h) / temperature, self.decode(h)


paddle.seed(0)
rng = np.random.RandomState(0)
x = paddle.to_tensor(rng.randn(64, 8).astype("float32"))
y = paddle.to_tensor(rng.randint(0, 3, 64).astype("int64"))
model = Net()
for p in model.embed.parameters():
    p.stop_gradient = True
body = paddle.optimizer.SGD(learning_rate=args.lr, parameters=[
    p for n, p in model.named_parameters() if not p.stop_gradient and not n.startswith(("head.", "decode."))])
heads = paddle.optimizer.Momentum(learning_rate=args.lr, momentum=0.9,
                                  parameters=model.head.parameters() + model.decode.parameters())

model.eval()
logits, _ = model({"x": x[48:]}, args.temperature)
print(f"before training: acc {(logits.argmax(1) == y[48:]).astype('float32').mean().item():.3f}")
model.train()

for epoch in range(3):
    for i in range(0, 48, 16):
        xb, yb = x[i:i + 16], y[i:i + 16]
        loss = 0
        for view in (xb, xb.flip(1)):
            logits, recon = model({"x": view}, args.temperature)
            loss = loss + F.cross_entropy(logits, yb) + args.aux * F.mse_loss(recon, view)
        body.clear_grad()
        heads.clear_grad()
        loss.backward()
        body.step()
        heads.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
