"""A table of indices one side saves and the other keeps out of its state dict (Swin's relative_position_index, LeViT's
attention_bias_idxs: portcheck.mapping.modules.table): it never blocks the pairing, convert fills it as a buffer from
the torch module's own, and a port that builds it otherwise is refused naming it. A refusal for another width lists
each side's buffers as buffers."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_forward, convert  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402

X = np.random.RandomState(0).randn(2, 4, 8).astype("float32")  # 2 windows of 4 positions, 8 wide


def index(flipped=False):
    """[4, 4]: each pair of positions' relative offset, as an index into a 7-row bias table."""
    pos = np.arange(4)
    out = pos[:, None] - pos[None, :] + 3
    return (out[::-1] if flipped else out).astype("int64")


def pair(plant=None, width=8):
    """Attention over 4 positions with a relative-position bias table [7, 2] (2 heads) read through an index table:
    torch keeps the table out of its state dict (persistent=False), the port saves it. plant "flipped": the port's
    table built in another order. width: the port's projection width."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = torch.nn.Linear(8, 24), torch.nn.Linear(8, 8)
            self.relative_position_bias_table = torch.nn.Parameter(torch.randn(7, 2))
            self.register_buffer("relative_position_index", torch.from_numpy(index()), persistent=False)

        def forward(self, x):
            q, k, v = self.qkv(x).reshape(2, 4, 3, 2, 4).permute(2, 0, 3, 1, 4)
            bias = self.relative_position_bias_table[self.relative_position_index.reshape(-1)].reshape(4, 4, 2)
            a = (q @ k.transpose(-2, -1) * 0.5 + bias.permute(2, 0, 1)).softmax(-1)
            return self.proj((a @ v).transpose(1, 2).reshape(2, 4, 8))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = paddle.nn.Linear(8, 24), paddle.nn.Linear(8, width)
            self.relative_position_bias_table = self.create_parameter([7, 2])
            self.register_buffer("relative_position_index", paddle.to_tensor(index(plant == "flipped").copy()))

        def forward(self, x):
            q, k, v = self.qkv(x).reshape([2, 4, 3, 2, 4]).transpose([2, 0, 3, 1, 4])
            bias = self.relative_position_bias_table[self.relative_position_index.reshape([-1])].reshape([4, 4, 2])
            a = paddle.nn.functional.softmax(q @ k.transpose([0, 1, 3, 2]) * 0.5 + bias.transpose([2, 0, 1]), -1)
            return self.proj((a @ v).transpose([0, 2, 1, 3]).reshape([2, 4, 8]))

    torch.manual_seed(0)
    paddle.seed(0)
    return Torch(), Port()


def test_an_index_table_one_side_saves_is_filled_as_a_buffer_and_the_pair_green():
    pt, pd = pair()
    convert(pt, pd, inputs=X)
    assert np.array_equal(pd.relative_position_index.numpy(), index())
    assert compare_forward(pt.eval(), pd.eval(), X, isolate=True).passed


def test_an_index_table_built_otherwise_is_refused_naming_it():
    pt, pd = pair(plant="flipped")
    with pytest.raises(PipelineError, match="Paddle buffer relative_position_index .* differs from torch's unsaved "
                                            "buffer relative_position_index"):
        convert(pt, pd, inputs=X)


def test_a_refusal_for_another_width_lists_the_buffer_as_a_buffer():
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = torch.nn.Linear(8, 8)
            self.block.register_buffer("index", torch.arange(4))

        def forward(self, x):
            return self.block(x)

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.block = paddle.nn.Linear(8, 6)
            self.block.register_buffer("index", paddle.arange(4))

        def forward(self, x):
            return self.block(x)

    with pytest.raises(PipelineError, match=r"block \(Linear: weight \[8, 8\], bias \[8\], index \(buffer\) \[4\]; "
                                            r"Paddle block: weight \[8, 6\], bias \[6\], index \(buffer\) \[4\]\)"):
        convert(Torch(), Port(), inputs=X)
