"""The forms of portcheck.mapping.regroup as a port writes them, each with no map: a query Linear whose port returns it
head-split, [batch, heads, seq, head size] (paddlenlp's BigBird Linear3D: its own type, a Linear's weight [in, out]),
and an attention whose torch side holds its projection [hidden, heads, head size] where the port holds [hidden,
hidden] (transformers' XLNet against paddlenlp's). Each converts with no map, green forward (isolated too) and
backward (3 steps); each plant, the heads split the wrong way round, is red at its module."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402
from portcheck.mapping import regroup  # noqa: E402

X = np.random.RandomState(0).randn(2, 5, 8).astype("float32")
HEADS, SIZE = 2, 8


def attend(q, k, v):
    """[batch, heads, seq, size] each: the attention's output [batch, seq, heads * size], either framework."""
    lib = torch if isinstance(q, torch.Tensor) else paddle
    w = lib.matmul(q, k.transpose(-1, -2) if lib is torch else k.transpose([0, 1, 3, 2])) / 4
    o = lib.matmul(torch.softmax(w, -1) if lib is torch else paddle.nn.functional.softmax(w, -1), v)
    o = o.transpose(1, 2) if lib is torch else o.transpose([0, 2, 1, 3])
    return o.reshape([o.shape[0], o.shape[1], -1])


def split(h):
    """torch's head split of a Linear's [batch, seq, hidden]."""
    return h.reshape(h.shape[0], h.shape[1], HEADS, SIZE).transpose(1, 2)


class Linear3D(paddle.nn.Layer):
    """paddlenlp's: a Linear's weight [in, out] and bias, its output [batch, heads, seq, size]. plant "heads": the
    hidden axis read [size, heads]; "weight": its square weight read [out, in] (x @ W.T)."""
    def __init__(self, plant=False):
        super().__init__()
        self.plant = plant
        self.weight = self.create_parameter([16, 16])
        self.bias = self.create_parameter([16], is_bias=True)

    def forward(self, h):
        out = paddle.matmul(h, self.weight, transpose_y=self.plant == "weight") + self.bias
        b, t = out.shape[:2]
        if self.plant == "heads":
            return out.reshape([b, t, SIZE, HEADS]).transpose([0, 3, 1, 2])
        return out.reshape([b, t, HEADS, SIZE]).transpose([0, 2, 1, 3])


def head_split(plant=False):
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Linear(8, 16)
            self.query, self.key, self.value = (torch.nn.Linear(16, 16) for _ in range(3))

        def forward(self, x):
            h = self.emb(x)
            return attend(split(self.query(h)), split(self.key(h)), split(self.value(h)))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.emb = paddle.nn.Linear(8, 16)
            self.query, self.key, self.value = Linear3D(plant), Linear3D(), Linear3D()

        def forward(self, x):
            h = self.emb(x)
            return attend(self.query(h), self.key(h), self.value(h))
    return Attention(), Port(), "query"


def merged_axes(plant=False):
    """torch's projections [hidden, heads, size], read by einsum; the port's [hidden, heads * size], read by matmul
    and a reshape. plant: the port reshapes its query to [.., size, heads]."""
    class Rel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Parameter(torch.randn(16, HEADS, SIZE) * .2) for _ in range(3))

        def forward(self, h):
            q, k, v = (torch.einsum("bih,hnd->bnid", h, w) for w in (self.q, self.k, self.v))
            return attend(q, k, v)

    class PortRel(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (self.create_parameter([16, HEADS * SIZE]) for _ in range(3))

        def forward(self, h):
            b, t = h.shape[:2]
            heads = lambda w, wrong=False: paddle.matmul(h, w).reshape([b, t, SIZE, HEADS] if wrong else [
                b, t, HEADS, SIZE]).transpose([0, 3, 1, 2] if wrong else [0, 2, 1, 3])
            return attend(heads(self.q, plant), heads(self.k), heads(self.v))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.rel = torch.nn.Linear(8, 16), Rel()

        def forward(self, x):
            return self.rel(self.emb(x))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.emb, self.rel = paddle.nn.Linear(8, 16), PortRel()

        def forward(self, x):
            return self.rel(self.emb(x))
    return Model(), Port(), "rel"


LAYOUTS = {head_split: None, merged_axes: {"Rel": "same"}}


def judged(build, plant=False):
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd, where = build(plant=plant)
    layouts = LAYOUTS[build]
    pd.set_state_dict(convert(pt, pd, inputs=X, layouts=layouts))
    forward = compare_forward(pt.eval(), pd.eval(), X, isolate=True, layouts=layouts)
    y = np.random.RandomState(1).randn(2, 5, 16).astype("float32")
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    backward = compare_backward(pt.train(), pd.train(), X, y, loss=loss, optimizer=sgd, steps=3, layouts=layouts)
    return forward, backward, where


@pytest.mark.parametrize("build, plant", [(head_split, "heads"), (merged_axes, True)],
                         ids=["head-split output, heads permuted", "merged axes, heads permuted"])
def test_a_regrouped_form_converts_with_no_map_green_and_its_plant_red_at_its_module(build, plant):
    """Before: PC012 (query is a Linear but Paddle query is a Linear3D), and its layouts= pasted, the outputs [2, 5, 16]
    and [2, 2, 5, 8] red; PC315 (rel: q [16, 2, 8] against Paddle's q [16, 16], no counterpart)."""
    forward, backward, where = judged(build)
    assert forward.passed and backward.passed, forward.table() + backward.table()
    if build is head_split:
        assert "the same values with axes split and reordered" in forward.table(), forward.table()
    forward, backward, where = judged(build, plant=plant)
    assert not forward.passed, forward.table()
    assert forward.first_diverging.startswith(where), forward.table()


def test_a_square_weight_its_own_type_reads_out_in_is_kept_so_by_the_run():
    """Linear3D's square weight read [out, in] (x @ W.T): neither its type nor its shape says the layout, so convert
    runs query both ways on torch's recorded input (its output head-split) and keeps torch's [out, in], which that
    forward reads: the port computes torch's query, green forward and backward (before: transposed by convention,
    red at query)."""
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd, _ = head_split(plant="weight")
    convert(pt, pd, inputs=X)
    np.testing.assert_array_equal(pd.query.weight.numpy(), pt.query.weight.detach().numpy())
    np.testing.assert_array_equal(pd.key.weight.numpy(), pt.key.weight.detach().numpy().T)
    forward, backward, _ = judged(head_split, plant="weight")
    assert forward.passed and backward.passed, forward.table() + backward.table()


def test_the_split_keeping_axes_in_their_order_is_the_rule_not_the_values():
    """[batch, seq, 16] against [batch, 2, seq, 8]: split 2 x 8, heads moved before seq; the other split (8 x 2,
    heads last moved first) is not taken even where the values are its: a port splitting that way is red."""
    a = np.arange(2 * 5 * 16, dtype=np.float32).reshape(2, 5, 16)
    right = a.reshape(2, 5, 2, 8).transpose(0, 2, 1, 3)
    wrong = a.reshape(2, 5, 8, 2).transpose(0, 3, 1, 2)
    assert regroup.regrouped(a.shape, right.shape)
    assert np.array_equal(regroup.as_other(a, right.shape), right)
    assert np.array_equal(regroup.as_other(right, a.shape), a)
    assert not np.array_equal(regroup.as_other(wrong, a.shape), a)
    assert regroup.merged((16, 2, 8), (16, 16)) and not regroup.merged((64, 16), (32, 32))
    assert regroup.tensors_fit(((2, 8, 16),), ((16, 16),)) and not regroup.tensors_fit(((16, 64),), ((32, 32),))
