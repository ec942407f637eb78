"""The forms of portcheck.mapping.loose as a user writes them, inside the model and at its root, where the run alone
pairs them wrongly: a pooler whose port holds `dense_weight` and `dense_bias` bare (the run paired torch's
pooler.dense with the port's pooler), a block holding its projection bare (`F.linear(h, W)` or `h @ W`) and a 0-d
temperature against the port's Linear and [1] (the run paired torch's block with the port's block.out_proj), and
CLIP's two projections at the root in crossed forms (the run paired torch's visual_projection with the port's
text_projection). Each converts with no map, green forward (isolated too) and backward (3 steps), each plant red.
Also an attention returning its weights on one side only: paired with the output of its shape, said, a plant red
there."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402

F = torch.nn.functional
X = np.random.RandomState(0).randn(2, 5, 8).astype("float32")


def pooler(plant=False):
    """plant: the port reads its square dense_weight as [out, in]."""
    class Pooler(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.dense = torch.nn.LayerNorm(16), torch.nn.Linear(16, 16)

        def forward(self, h):
            return torch.tanh(self.dense(self.norm(h)))

    class PortPooler(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm = paddle.nn.LayerNorm(16)
            self.dense_weight = self.create_parameter([16, 16])
            self.dense_bias = self.create_parameter([16], is_bias=True)

        def forward(self, h):
            return paddle.tanh(paddle.matmul(self.norm(h), self.dense_weight, transpose_y=plant) + self.dense_bias)
    return Pooler(), PortPooler(), (2, 5, 16)


def block(torch_layout, plant=False):
    """torch's block holds its projection bare, [out, in] read by F.linear or [in, out] read by h @ W, and a 0-d
    temperature; the port's a Linear and [1]. plant: the port multiplies by its temperature."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(16)
            self.out_proj = torch.nn.Parameter(torch.randn(*((6, 16) if torch_layout == "out, in" else (16, 6))) * .2)
            self.temperature = torch.nn.Parameter(torch.tensor(0.7))

        def forward(self, h):
            h = self.norm(h)
            return (F.linear(h, self.out_proj) if torch_layout == "out, in" else h @ self.out_proj) / self.temperature

    class PortBlock(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm, self.out_proj = paddle.nn.LayerNorm(16), paddle.nn.Linear(16, 6, bias_attr=False)
            self.temperature = self.create_parameter([1])

        def forward(self, h):
            h = self.out_proj(self.norm(h))
            return h * self.temperature if plant else h / self.temperature
    return Block(), PortBlock(), (2, 5, 6)


def clip(plant=False):
    """CLIP's head at the root: torch's text_projection bare [in, out] and visual_projection a Linear, the port's the
    other way; logit_scale 0-d against [1]. plant: the port's logit scale not exponentiated."""
    class Clip(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = torch.nn.Linear(8, 16)
            self.text_projection = torch.nn.Parameter(torch.randn(16, 6) * .2)
            self.visual_projection = torch.nn.Linear(16, 6, bias=False)
            self.logit_scale = torch.nn.Parameter(torch.tensor(0.5))  # logits near 1: the guide's mean bound 1e-6 holds

        def forward(self, x):
            h = self.enc(x)
            a, b = h[:, 0] @ self.text_projection, self.visual_projection(h[:, 1])
            a, b = a / a.norm(dim=-1, keepdim=True), b / b.norm(dim=-1, keepdim=True)
            return self.logit_scale.exp() * a @ b.t()

    class PortClip(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.enc, self.text_projection = paddle.nn.Linear(8, 16), paddle.nn.Linear(16, 6, bias_attr=False)
            self.visual_projection, self.logit_scale = self.create_parameter([16, 6]), self.create_parameter([1])

        def forward(self, x):
            h = self.enc(x)
            a, b = self.text_projection(h[:, 0]), paddle.matmul(h[:, 1], self.visual_projection)
            a, b = a / a.norm(axis=-1, keepdim=True), b / b.norm(axis=-1, keepdim=True)
            return (self.logit_scale if plant else self.logit_scale.exp()) * paddle.matmul(a, b, transpose_y=True)
    return Clip(), PortClip(), (2, 2)


def attention(weights_first=False, plant=False):
    """torch's attention returns (its output, its weights), or (weights, output), the port's its output alone.
    plant: the port's scale."""
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.o = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)

        def forward(self, h):
            q, k, v = self.qkv(h).chunk(3, -1)
            w = (q @ k.transpose(1, 2) / 4).softmax(-1)
            return (w, self.o(w @ v)) if weights_first else (self.o(w @ v), w)

    class PortAttention(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.qkv, self.o = paddle.nn.Linear(16, 48), paddle.nn.Linear(16, 16)

        def forward(self, h):
            q, k, v = self.qkv(h).chunk(3, -1)
            w = paddle.nn.functional.softmax(paddle.matmul(q, k, transpose_y=True) / (5 if plant else 4), -1)
            return self.o(paddle.matmul(w, v))
    return Attention(), PortAttention(), (2, 5, 16)


def models(part):
    """The part inside a model, after an embedding Linear (CLIP's head is the whole model)."""
    inner, port_inner, shape = part
    if type(inner).__name__ == "Clip":
        return inner, port_inner, shape
    returns_two = type(inner).__name__ == "Attention"

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.part = torch.nn.Linear(8, 16), inner

        def forward(self, x):
            h = self.emb(x)
            return h + [o for o in self.part(h) if o.shape == h.shape][0] if returns_two else self.part(h)

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.emb, self.part = paddle.nn.Linear(8, 16), port_inner

        def forward(self, x):
            h = self.emb(x)
            return h + self.part(h) if returns_two else self.part(h)
    return Model(), Port(), shape


def judged(build, *args, plant=False):
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd, shape = models(build(*args, plant=plant))
    pd.set_state_dict(convert(pt, pd, inputs=X))
    forward = compare_forward(pt.eval(), pd.eval(), X, isolate=True)
    y = np.random.RandomState(1).randn(*shape).astype("float32")
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    return forward, compare_backward(pt.train(), pd.train(), X, y, loss=loss, optimizer=sgd, steps=3)


FORMS = {"a pooler's Linear against the port's dense_weight, dense_bias": (pooler, (), "part", "grad part.dense.bias"),
         "a block's bare [out, in] and 0-d against a Linear and [1]": (block, ("out, in",), "part",
                                                                         "grad part.temperature"),
         "a block's bare [in, out] against a Linear": (block, ("in, out",), "part", "grad part.out_proj"),
         "CLIP's projections crossed at the root, 0-d against [1]": (clip, (), "(model)", "grad text_projection"),
         "an attention returning its weights on one side only": (attention, (), "part", "grad part.o.weight"),
         "an attention returning its weights first on one side only": (attention, (True,), "part",
                                                                        "grad part.o.weight")}


@pytest.mark.parametrize("form", list(FORMS))
def test_a_form_held_otherwise_inside_or_at_the_root_is_green_with_no_map_and_its_plant_red(form):
    """Before: convert refused the pooler (PC012: pooler.dense is a Linear but Paddle pooler is a PP), the block
    (PC011: no layout for the block's type), CLIP's head (PC011); with a map, the run's pairs were the wrong ones."""
    build, args, where, grad = FORMS[form]
    forward, backward = judged(build, *args)
    assert forward.passed and backward.passed, forward.table() + backward.table()
    assert grad in {r.name for r in backward.grads}, backward.table()
    if build is attention:  # before, weights first: the attention paired with nothing, its output judged nowhere
        # the output is its out-projection's, handed on: paired as that (forward.leaves.handed_on), the weights left
        assert ("part: torch's returns 2 outputs, the other side's 1: paired each as the inner call's output it hands "
                f"on, torch's part[{0 if args else 1}] left out") in forward.table(), forward.table()
    forward, backward = judged(build, *args, plant=True)
    assert not forward.passed and not backward.passed
    assert forward.first_diverging.startswith(where), forward.table()


def class_token(plant=False):
    """A vision tower's embeddings: torch's a module holding the class token and the patch projection, the port's
    the tower itself holding both and concatenating inline (paddlenlp's CLIP vision model). plant: the port's
    class token zeroed."""
    class Embeddings(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cls, self.patch = torch.nn.Parameter(torch.randn(16)), torch.nn.Linear(8, 16)

        def forward(self, x):
            return torch.cat([self.cls.expand(x.shape[0], 1, 16), self.patch(x)], 1)

    class Tower(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings, self.norm = Embeddings(), torch.nn.LayerNorm(16)

        def forward(self, x):
            return self.norm(self.embeddings(x))

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tower, self.head = Tower(), torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.head(self.tower(x))

    class PortTower(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.cls = self.create_parameter([16])
            self.patch, self.norm = paddle.nn.Linear(8, 16), paddle.nn.LayerNorm(16)

        def forward(self, x):
            return self.norm(paddle.concat([self.cls.expand([x.shape[0], 1, 16]), self.patch(x)], 1))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.tower, self.head = PortTower(), paddle.nn.Linear(16, 4)

        def forward(self, x):
            return self.head(self.tower(x))

    torch.manual_seed(0)
    pt, pd = Torch().eval(), Port()
    pd.eval()
    convert(pt, pd, inputs=X)
    if plant:
        pd.tower.cls.set_value(np.zeros(16, "float32"))
    return compare_forward(pt, pd, X)


def test_a_value_a_module_the_port_computes_inline_makes_is_named_at_that_module():
    """Before: the class token zeroed was named at the model's output, (model) (torch's tower.embeddings, paired
    with the port's whole tower by the tensor it holds, no counterpart of its output, taken for the place and left
    out of report.paired); then at its reader, tower.norm (paddlenlp's CLIP: pre_layrnorm), one level off. Now at
    tower.embeddings: its output judged against the input the port's tower computes for its norm."""
    assert class_token().passed
    report = class_token(plant=True)
    assert report.first_diverging == "tower.embeddings", report.table()
    assert "judged against the input Paddle's tower computes for its tower.norm" in report.table()
