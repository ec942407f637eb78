"""A port whose Linears are a class of its own holding torch's [out, in] weight, read as F.linear reads it (as ports
were written before paddle.compat), every weight square: no type the library knows and no shape says the layout.
The torch side is paconvert.SquareMLP. plant: "relu" (the activation after the second layer), "bias" (the second
layer adds its bias twice: neither layout gives torch's output there)."""
import paddle

from ports.paconvert import FEATURES, SquareMLP  # noqa: F401 (the torch side, and its batch)


class TorchLayoutLinear(paddle.nn.Layer):
    def __init__(self, in_features, out_features, plant=None):
        super().__init__()
        self.weight = self.create_parameter([out_features, in_features])
        self.bias = self.create_parameter([out_features], is_bias=True)
        self.plant = plant

    def forward(self, x):
        y = paddle.matmul(x, self.weight, transpose_y=True) + self.bias
        return y + self.bias if self.plant == "bias" else y


class OwnLinearMLP(paddle.nn.Layer):
    def __init__(self, dim=16, depth=3, plant=None):
        super().__init__()
        self.layers = paddle.nn.LayerList([TorchLayoutLinear(dim, dim, plant if i == 1 else None)
                                           for i in range(depth)])
        self.norm = paddle.nn.LayerNorm(dim)
        self.plant = plant

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            x = paddle.nn.functional.relu(x) if self.plant == "relu" and i == 1 else paddle.tanh(x)
        return self.norm(x)
