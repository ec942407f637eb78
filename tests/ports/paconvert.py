"""Small models as PaConvert 3.3.1 writes their Paddle side (paconvert --in_dir torch_file.py --out_dir out): every
torch.nn.Linear as paddle.compat.nn.Linear, which holds torch's [out, in] weight, beside paddle.nn's Conv2D and
LayerNorm under torch's spellings (paddle.nn.Module, paddle.nn.Conv2d, eps=). MixedNet's port also holds a classic
paddle.nn.Linear ([in, out]), as a port does where a hand-written part meets PaConvert's output. SquareMLP's Linears
are all square: their shapes cannot say the layout. Each Paddle class takes plant=: a bug, named by its module."""
import numpy as np
import paddle
import torch

IMAGES = np.random.RandomState(0).randn(2, 3, 8, 8).astype("float32")
FEATURES = np.random.RandomState(1).randn(4, 16).astype("float32")


class SmallNet(torch.nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.LayerNorm(8)
        self.proj = torch.nn.Linear(8, 12)
        self.head = torch.nn.Linear(12, classes)

    def forward(self, x):
        x = self.conv(x).mean(dim=(2, 3))
        x = torch.relu(self.proj(self.norm(x)))
        return self.head(x)


class PaConvertSmallNet(paddle.nn.Module):
    """plant: "reflect" (the convolution pads by reflection, not zeros), "sigmoid" (relu as sigmoid after proj)."""
    def __init__(self, classes=5, plant=None):
        super().__init__()
        self.plant = plant
        self.conv = paddle.nn.Conv2d(3, 8, 3, padding=1, padding_mode="reflect" if plant == "reflect" else "zeros")
        self.norm = paddle.nn.LayerNorm(8)
        self.proj = paddle.compat.nn.Linear(8, 12)
        self.head = paddle.compat.nn.Linear(12, classes)

    def forward(self, x):
        x = self.conv(x).mean(dim=(2, 3))
        act = paddle.nn.functional.sigmoid if self.plant == "sigmoid" else paddle.nn.functional.relu
        x = act(x=self.proj(self.norm(x)))
        return self.head(x)


class MixedNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Linear(16, 24)
        self.norm = torch.nn.LayerNorm(24)
        self.body = torch.nn.Linear(24, 12)
        self.head = torch.nn.Linear(12, 6)

    def forward(self, x):
        return self.head(torch.tanh(self.body(self.norm(torch.relu(self.stem(x))))))


class PaConvertMixedNet(paddle.nn.Module):
    """PaConvert's stem and body (paddle.compat.nn.Linear, [out, in]) and a hand-written head (paddle.nn.Linear,
    [in, out]). plant: "body" (body's bias doubled in its forward)."""
    def __init__(self, plant=None):
        super().__init__()
        self.plant = plant
        self.stem = paddle.compat.nn.Linear(16, 24)
        self.norm = paddle.nn.LayerNorm(24)
        self.body = paddle.compat.nn.Linear(24, 12)
        self.head = paddle.nn.Linear(12, 6)

    def forward(self, x):
        h = self.body(self.norm(paddle.nn.functional.relu(self.stem(x))))
        if self.plant == "body":
            h = h + self.body.bias
        return self.head(paddle.tanh(h))


class SquareMLP(torch.nn.Module):
    def __init__(self, dim=16, depth=3):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(dim, dim) for _ in range(depth)])
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.norm(x)


class ReadInOut(paddle.compat.nn.Linear):
    """A paddle.compat.nn.Linear whose forward reads its weight as the classic Linear's [in, out] (x @ W)."""
    def forward(self, x):
        return x.matmul(self.weight) + self.bias


class PaConvertSquareMLP(paddle.nn.Module):
    """plant: "transposed" (the second layer reads its weight as [in, out], ReadInOut)."""
    def __init__(self, dim=16, depth=3, plant=None):
        super().__init__()
        self.layers = paddle.nn.ModuleList([(ReadInOut if plant == "transposed" and i == 1 else
                                             paddle.compat.nn.Linear)(dim, dim) for i in range(depth)])
        self.norm = paddle.nn.LayerNorm(dim)

    def forward(self, x):
        for layer in self.layers:
            x = paddle.tanh(layer(x))
        return self.norm(x)
