"""A mixture of experts judged from records saved apart (each side's record_forward or record_backward written to a
file and read back, as two processes or two venvs write them) as compare_forward and compare_backward judge it in one
process: torch's packed experts said as the port's list from the two records alone (mapping.experts.marked), the
choice of experts torch's block handed them kept in torch's record, its float64 run's too (forward.routing). A port's
router returning its top k is judged against it; a renormalisation flipped there is red at the router through the
files; a torch record keeping no choice is never green (PC943)."""
import numpy as np
import pytest

import portcheck.core.runtime  # noqa: F401 (first: threads, quiet notices)
from portcheck import compare_backward, compare_forward, convert
from portcheck.core.fileio import load_npy, save_npy
from portcheck.forward.compare import judge_forward, record_forward

H, E, I, K = 8, 4, 12, 2  # hidden, experts, expert width, experts per token
X = np.random.RandomState(1).randn(2, 6, H).astype("float32")


def torch_moe(bias=None):
    """transformers 5's layout: a router returning logits, the block choosing the top k of their softmax and
    renormalising them, and the experts packed (gate_up_proj [E, 2I, H], down_proj [E, H, I]) handed that choice.
    bias: a score bias of each expert the choice reads and the weights do not (DeepSeek-V3's)."""
    import torch
    from torch import nn

    class Router(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(E, H) * 0.3)

        def forward(self, x):
            return nn.functional.linear(x, self.weight)

    class Experts(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_up_proj = nn.Parameter(torch.randn(E, 2 * I, H) * 0.2)
            self.down_proj = nn.Parameter(torch.randn(E, H, I) * 0.2)

        def forward(self, x, index, weights):
            out = torch.zeros_like(x)
            for e in range(E):
                rows, slot = torch.nonzero(index == e, as_tuple=True)
                gate, up = nn.functional.linear(x[rows], self.gate_up_proj[e]).chunk(2, -1)
                y = nn.functional.linear(nn.functional.silu(gate) * up, self.down_proj[e])
                out = out.index_add(0, rows, y * weights[rows, slot, None])
            return out

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate, self.experts = Router(), Experts()

        def forward(self, x):
            flat = x.reshape(-1, H)
            probs = torch.softmax(self.gate(flat), -1)
            index = (probs + torch.tensor(bias or [0.0] * E)).topk(K, -1)[1]
            top = probs.gather(1, index)
            return self.experts(flat, index, top / top.sum(-1, keepdim=True)).reshape(x.shape)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp, self.head = MoE(), nn.Linear(H, 3)

        def forward(self, x):
            return self.head(x + self.mlp(x))

    torch.manual_seed(0)
    return Model().eval()


def paddle_moe(renormalised=True):
    """paddleformers' layout: a router returning its top k and their weights (TopkRouter), one module per expert
    (up_gate_proj [gate | up], down_proj). renormalised=False: the top k's weights left as the softmax gave them."""
    import paddle
    from paddle import nn

    class MLP(nn.Layer):
        def __init__(self):
            super().__init__()
            self.up_gate_proj = nn.Linear(H, 2 * I, bias_attr=False)
            self.down_proj = nn.Linear(I, H, bias_attr=False)

        def forward(self, x):
            gate, up = self.up_gate_proj(x).chunk(2, axis=-1)
            return self.down_proj(nn.functional.silu(gate) * up)

    class TopkRouter(nn.Layer):
        def __init__(self):
            super().__init__()
            self.weight = self.create_parameter([E, H])

        def forward(self, x):
            weights, index = paddle.topk(nn.functional.softmax(x @ self.weight.T, -1), K, axis=-1)
            return index, weights / weights.sum(-1, keepdim=True) if renormalised else weights

    class MoE(nn.Layer):
        def __init__(self):
            super().__init__()
            self.gate, self.experts = TopkRouter(), nn.LayerList([MLP() for _ in range(E)])

        def forward(self, x):
            flat = x.reshape([-1, H])
            index, weights = self.gate(flat)
            out = paddle.zeros_like(flat)
            for e in range(E):
                rows, slot = paddle.nonzero(index == e, as_tuple=True)
                if rows.shape[0]:
                    rows, slot = rows.reshape([-1]), slot.reshape([-1])
                    y = self.experts[e](flat[rows]) * weights[rows, slot].unsqueeze(-1)
                    out = paddle.index_add(out, rows, 0, y)
            return out.reshape(x.shape)

    class Model(nn.Layer):
        def __init__(self):
            super().__init__()
            self.mlp, self.head = MoE(), nn.Linear(H, 3)

        def forward(self, x):
            return self.head(x + self.mlp(x))

    paddle.seed(1)
    model = Model()
    model.eval()
    return model


def paddle_linear_gate(bias):
    """A port whose router is a Linear returning logits, its block choosing the experts with `bias` as torch_moe's
    does and feeding each expert its tokens' rows."""
    import paddle
    from paddle import nn
    model = paddle_moe()
    block = model.mlp
    block.gate = nn.Linear(H, E, bias_attr=False)

    def forward(x):
        flat = x.reshape([-1, H])
        probs = nn.functional.softmax(block.gate(flat), -1)
        index = paddle.topk(probs + paddle.to_tensor(bias), K, axis=-1)[1]
        weights = paddle.take_along_axis(probs, index, -1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = paddle.zeros_like(flat)
        for e in range(E):
            rows, slot = paddle.nonzero(index == e, as_tuple=True)
            if rows.shape[0]:
                rows, slot = rows.reshape([-1]), slot.reshape([-1])
                out = paddle.index_add(out, rows, 0, block.experts[e](flat[rows]) * weights[rows, slot].unsqueeze(-1))
        return out.reshape(x.shape)
    block.forward = forward
    return model


def saved(folder, name, record) -> dict:
    """The record as another process reads it: written to a file and loaded back (no pickle of code, sizes checked)."""
    save_npy(folder / f"{name}.npy", record)
    return load_npy(folder / f"{name}.npy")


@pytest.fixture(scope="module")
def pair():
    pt = torch_moe()
    ports = {}
    for renormalised in (True, False):
        ports[renormalised] = paddle_moe(renormalised)
        convert(pt, ports[renormalised], inputs=X)
    return pt, ports


@pytest.mark.parametrize("renormalised", [True, False], ids=["correct port", "renormalisation left out"])
def test_records_saved_apart_are_judged_as_in_one_process(pair, tmp_path, renormalised):
    """The same rows, routing line and verdict from two saved records as compare_forward's: green, each token's
    experts and their weights read and judged by torch's float64 routing; the renormalisation left out red at the
    router (PC942)."""
    pt, ports = pair
    here = compare_forward(pt, ports[renormalised], X)
    t, p = (saved(tmp_path, side, record_forward(model, X)) for side, model in (("torch", pt), ("paddle",
                                                                                              ports[renormalised])))
    assert {"route/mlp.experts", "route/mlp.experts:weights", "f64:route/mlp.experts"} <= set(t)
    apart = judge_forward(t, p)
    (routed,) = apart.routing
    assert [r.line() for r in apart.routing] == [r.line() for r in here.routing], apart.table()
    assert [(r.name, r.passed) for r in apart.rows] == [(r.name, r.passed) for r in here.rows]
    assert apart.passed == here.passed == renormalised and routed.topk and routed.weights_row is not None
    if renormalised:
        return
    assert str(apart.first_diverging) == str(here.first_diverging) == "mlp.gate", apart.table()
    assert routed.red and not routed.differing and "[PC942]" in routed.line(), routed.line()


@pytest.mark.parametrize("kept", ["none", "forged", "float64 forged"])
def test_a_torch_record_keeping_no_choice_of_experts_is_never_green(pair, kept):
    """A torch record without the choice its block handed its packed experts (one written before it was kept), or
    with one no run writes (floats for its experts; its float64 run's weights a shape apart from its experts'): the
    port's top k, or its weights, have nothing to be judged against: not read, said (PC943), never green."""
    pt, ports = pair
    t = {k: v for k, v in record_forward(pt, X).items() if "route/" not in k or kept != "none"}
    if kept == "forged":
        t["route/mlp.experts"] = t["route/mlp.experts"].astype(np.float32)
    if kept == "float64 forged":
        t["f64:route/mlp.experts:weights"] = t["f64:route/mlp.experts:weights"][:, :1]
    report = judge_forward(t, record_forward(ports[True], X))
    (routed,) = report.routing
    assert routed.unread and not report.passed and report.first_diverging is None
    where = "mlp.experts in its float64 run" if kept == "float64 forged" else "mlp.experts that"
    assert f"torch's record holds no choice of experts its block handed {where}" in routed.line() and \
        "[PC943]" in routed.line() and report.view()["headline"].startswith("red: routing at mlp.gate: not read")


def test_each_steps_routing_is_read_from_records_saved_apart_as_compare_backward_reads_it(pair, tmp_path):
    """record_backward on each side, saved and read back: the first forward's routing and step 2's read as
    compare_backward reads them (the same lines)."""
    import paddle
    import torch
    pt, ports = pair
    pd = ports[True]
    start = ({k: v.clone() for k, v in pt.state_dict().items()},
             {k: v.numpy().copy() for k, v in pd.state_dict().items()})
    target = np.random.RandomState(3).randn(2, 6, 3).astype("float32")
    loss = (lambda o, y: ((o - y) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.05), lambda ps: paddle.optimizer.SGD(0.05, parameters=ps))

    def restart():
        pt.load_state_dict(start[0])
        pd.set_state_dict({k: paddle.to_tensor(v) for k, v in start[1].items()})
    from portcheck.gradients.backward import judge_backward
    from portcheck.gradients.recording import record_backward
    try:
        here = compare_backward(pt.train(), pd.train(), X, target, loss, sgd, steps=2)
        restart()
        # torch alone: its router and packed experts declared as they are held (the port is not at hand)
        t = record_backward(pt.train(), X, target, loss[0], sgd[0], steps=2,
                            layouts={"Router": "same", "Experts": "same"})
        p = record_backward(pd.train(), X, target, loss[1], sgd[1], steps=2)
    finally:
        restart()
        pt.eval(), pd.eval()
    apart = judge_backward(saved(tmp_path, "torch", t), saved(tmp_path, "paddle", p))
    lines = lambda report: [[r.line() for r in report.forward.routing]] + \
        [[r.line(step=i) for r in routed] for i, routed in sorted(report.routing.items())]
    assert here.passed and lines(apart) == lines(here), (lines(apart), lines(here))
    assert [len(x) for x in lines(apart)] == [1, 1] and all(r.topk for r in apart.routing[1])


def test_packed_experts_choice_read_from_what_torchs_block_handed_them_not_rebuilt_from_its_router(tmp_path):
    """torch's packed experts against a port's experts fed rows: torch's choice is the one its block handed them (kept
    in its record), not the top k of its router's output, which a score bias the choice reads (DeepSeek-V3's) makes
    another: the correct port green in one process and from records saved apart, the same tokens read."""
    bias = [0.3, -0.2, 0.1, -0.4]
    pt, pd = torch_moe(bias), paddle_linear_gate(bias)
    convert(pt, pd, inputs=X)
    here = compare_forward(pt, pd, X)
    apart = judge_forward(*(saved(tmp_path, side, record_forward(m, X)) for side, m in (("torch", pt), ("paddle", pd))))
    for report in here, apart:
        (routed,) = report.routing
        assert report.passed and not routed.topk and not routed.red and not routed.flipped, report.table()
        assert routed.line().startswith("routing at mlp.gate: each of 12 tokens reached the same experts of 4")
    assert here.routing[0].chosen == apart.routing[0].chosen
