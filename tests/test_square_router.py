"""A router of a type of its own as many experts wide as the hidden size (DeepSeek-V3's and GLM-4-MoE's: a weight
[experts, hidden] and a score bias, the port's router returning its top k where torch's returns logits): its square
weight fits either layout, so convert runs it both ways on torch's recorded input (judged where its parent block
computes, its own output being of another form) and keeps the one giving torch's values, said in one line; never
the shape's luck. Held as it is or transposed, the correct port is green; compare_backward takes the layout the Paddle
model holds; a plant in the routing (the top-k weights not renormalised, the score bias left out of the choice, the
experts read one off) is red inside the block holding the router."""
import numpy as np
import pytest

import portcheck.core.runtime  # noqa: F401 (first: threads, quiet notices)
from portcheck import compare_backward, compare_forward, convert
from portcheck.core.errors import PipelineError

H = E = 8  # hidden width, experts: a square router
K = 2      # experts per token
X = np.random.RandomState(0).randn(2, 12, H).astype("float32")


def torch_model():
    import torch
    from torch import nn

    class TopkRouter(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(E, H) * 0.5)
            self.register_buffer("e_score_correction_bias", torch.randn(E) * 0.3)

        def forward(self, x):
            return nn.functional.linear(x, self.weight)

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = TopkRouter()
            self.experts = nn.ModuleList(nn.Linear(H, H, bias=False) for _ in range(E))

        def forward(self, x):
            flat = x.reshape(-1, H)
            scores = self.gate(flat).sigmoid()
            index = (scores + self.gate.e_score_correction_bias).topk(K, -1).indices
            weights = scores.gather(1, index)
            weights = weights / weights.sum(-1, keepdim=True)
            out = torch.zeros_like(flat)
            for e, expert in enumerate(self.experts):
                rows, slot = torch.nonzero(index == e, as_tuple=True)
                if len(rows):
                    out = out.index_add(0, rows, expert(flat[rows]) * weights[rows, slot, None])
            return out.reshape(x.shape)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.mlp = nn.LayerNorm(H), MoE()

        def forward(self, x):
            return x + self.mlp(self.norm(x))

    torch.manual_seed(0)
    return Model().eval()


def paddle_model(held="same", plant=None):
    """held: the router's weight [experts, hidden] read as F.linear reads it ("same"), or [hidden, experts] read
    x @ W ("transpose"). plant: "renorm" (its top-k weights not renormalised), "bias" (the score bias left out of
    the choice), "order" (expert e's tokens sent to expert e + 1)."""
    import paddle
    from paddle import nn

    class TopkRouter(nn.Layer):
        def __init__(self):
            super().__init__()
            self.weight = self.create_parameter([E, H])
            self.register_buffer("e_score_correction_bias", paddle.zeros([E]))

        def forward(self, x):
            scores = nn.functional.sigmoid(x @ (self.weight.T if held == "same" else self.weight))
            choice = scores if plant == "bias" else scores + self.e_score_correction_bias
            index = paddle.topk(choice, K, axis=-1)[1]
            weights = paddle.take_along_axis(scores, index, axis=1)
            if plant != "renorm":
                weights = weights / weights.sum(-1, keepdim=True)
            return index, weights

    class MoE(nn.Layer):
        def __init__(self):
            super().__init__()
            self.gate = TopkRouter()
            self.experts = nn.LayerList([nn.Linear(H, H, bias_attr=False) for _ in range(E)])

        def forward(self, x):
            flat = x.reshape([-1, H])
            index, weights = self.gate(flat)
            out = paddle.zeros_like(flat)
            for e in range(E):
                rows, slot = paddle.nonzero(index == e, as_tuple=True)
                if rows.shape[0]:
                    rows, slot = rows.reshape([-1]), slot.reshape([-1])
                    y = self.experts[(e + (plant == "order")) % E](flat[rows]) * weights[rows, slot].unsqueeze(-1)
                    out = paddle.index_add(out, rows, 0, y)
            return out.reshape(x.shape)

    class Model(nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm, self.mlp = nn.LayerNorm(H), MoE()

        def forward(self, x):
            return x + self.mlp(self.norm(x))

    paddle.seed(1)
    model = Model()
    model.eval()
    return model


@pytest.mark.parametrize("held", ["same", "transpose"])
def test_a_square_router_is_settled_by_its_run_either_way_and_green(held):
    pt, pd = torch_model(), paddle_model(held)
    state = convert(pt, pd, inputs=X)
    weight = pt.mlp.gate.weight.detach().numpy()
    assert np.array_equal(pd.mlp.gate.weight.numpy(), weight if held == "same" else weight.T)
    taken = "as it is" if held == "same" else "transposed"
    assert f"torch mlp.gate's square weight in Paddle mlp.gate: run both ways on torch's recorded input (" in state.said
    assert f"of its scale from torch's mlp, its parent): taken {taken}" in state.said, state.said
    report = compare_forward(pt, pd, X, isolate=True)
    assert report.passed, report.first_diverging


def test_without_inputs_a_square_router_is_refused_never_taken_by_its_shape():
    with pytest.raises(PipelineError, match=r"square: either layout fits.*pass inputs=.*\[PC455\]"):
        convert(torch_model(), paddle_model("transpose"))


def test_compare_backward_takes_the_layout_the_paddle_model_holds():
    import paddle
    import torch
    pt, pd = torch_model(), paddle_model("transpose")
    convert(pt, pd, inputs=X)
    target = np.random.RandomState(1).randn(*X.shape).astype("float32")
    loss = (lambda o, y: ((o - y) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.01), lambda ps: paddle.optimizer.SGD(0.01, parameters=ps))
    report = compare_backward(pt.train(), pd.train(), X, target, loss=loss, optimizer=sgd, steps=1)
    assert report.passed, report.table()


@pytest.mark.parametrize("plant", ["renorm", "bias", "order"])
def test_a_plant_in_the_routing_is_red_at_the_block_holding_the_router(plant):
    pt, pd = torch_model(), paddle_model("same", plant)
    convert(pt, pd, inputs=X)
    report = compare_forward(pt, pd, X)
    assert not report.passed and report.first_diverging.startswith("mlp"), report.first_diverging
