"""A scale one side's module holds inside it and the other side's parent applies right after its module, outside any
module (transformers' MBartScaledWordEmbedding against paddlenlp's plain Embedding times embed_scale in
MBartEncoder.forward): the same computation, judged as the value the next module sees (trace.scale_rules), green
forward (cumulative and isolated) and backward, and red where the scale is missing or wrong."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402

D, SCALE = 24, math.sqrt(24)
IDS = np.random.RandomState(0).randint(0, 50, size=(2, 6)).astype("int64")


def pair(inside="torch", scale=SCALE, form="number"):
    """torch's model and its port: embedding, positions, norm, head. inside="torch": torch's embedding scales its
    own output, the port's parent scales a plain Embedding's by `scale` (None: not at all); inside="paddle": the
    converse, torch's parent scaling, the port's embedding by `scale`. form: how the parent holds its scale, a
    number, a 0-d tensor (Gemma's `torch.tensor(hidden ** 0.5)`) or a one-element tensor."""
    def held(c, to_tensor):
        return c if form == "number" else to_tensor(np.array(c if form == "0-d" else [c], dtype="float32"))
    class TorchScaled(torch.nn.Embedding):
        def forward(self, ids):
            return super().forward(ids) * SCALE

    class PaddleScaled(paddle.nn.Embedding):
        def forward(self, ids):
            return super().forward(ids) if scale is None else super().forward(ids) * scale

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = (TorchScaled if inside == "torch" else torch.nn.Embedding)(50, D)
            self.pos, self.norm, self.head = torch.nn.Embedding(6, D), torch.nn.LayerNorm(D), torch.nn.Linear(D, 4)

        def forward(self, ids):
            h = self.embed(ids) if inside == "torch" else self.embed(ids) * held(SCALE, torch.from_numpy)
            return self.head(self.norm(h + self.pos(torch.arange(ids.shape[1]))))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed = (PaddleScaled if inside == "paddle" else paddle.nn.Embedding)(50, D)
            self.pos, self.norm, self.head = paddle.nn.Embedding(6, D), paddle.nn.LayerNorm(D), paddle.nn.Linear(D, 4)

        def forward(self, ids):
            h = self.embed(ids)
            h = h if inside == "paddle" or scale is None else h * held(scale, paddle.to_tensor)
            return self.head(self.norm(h + self.pos(paddle.arange(ids.shape[1]))))

    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = Torch(), Port()
    convert(pt, pd, inputs=IDS)
    return pt, pd


def train(pt, pd):
    y = np.random.RandomState(1).randn(2, 6, 4).astype("float32")
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    return compare_backward(pt.train(), pd.train(), IDS, y, loss=loss, optimizer=sgd, steps=3)


@pytest.mark.parametrize("form", ["number", "0-d", "one-element"])
@pytest.mark.parametrize("inside", ["torch", "paddle"])
def test_a_scale_held_inside_one_sides_module_and_applied_by_the_others_parent_is_green_said(inside, form):
    """Red at `embed` on this correct port without the rule (max abs diff 12.3, allowed 4.4e-05), cumulative and
    isolated; the scale a tensor as much as a number."""
    pt, pd = pair(inside, form=form)
    report = compare_forward(pt.eval(), pd.eval(), IDS, isolate=True)
    assert report.passed, report.table()
    said = "\n".join(report.pairing.lines())
    assert "embed -> embed (" in said and "[PC445]" in said, said
    assert "over" in said if inside == "torch" else "times" in said, said
    backward = train(pt, pd)
    assert backward.passed, backward.table()


@pytest.mark.parametrize("inside, scale, form",
                         [("torch", None, "number"), ("torch", SCALE + 1, "number"), ("paddle", SCALE + 1, "number"),
                          ("torch", SCALE + 1, "0-d"), ("paddle", SCALE + 1, "0-d")],
                         ids=["parent's scale missing", "parent's scale sqrt(d) + 1", "module's scale sqrt(d) + 1",
                              "parent's 0-d tensor sqrt(d) + 1", "module's scale sqrt(d) + 1, torch's a 0-d tensor"])
def test_a_port_missing_the_scale_or_scaling_wrong_is_red_at_the_embedding(inside, scale, form):
    pt, pd = pair(inside, scale, form)
    report = compare_forward(pt.eval(), pd.eval(), IDS, isolate=True)
    assert not report.passed, report.table()
    assert "modules whose own computation differs: embed" in report.table(), report.table()
    assert not train(pt, pd).passed
