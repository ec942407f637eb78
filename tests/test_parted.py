"""A Linear's bias its parent holds in parts (mapping.parted): an attention written as timm's EVA writes it, q_bias
and v_bias of its own and k's zeros a buffer it does not save, handed to a bias-less qkv through F.linear, against a
port whose qkv Linear holds the three as one bias: the same model, paired, filled and judged with no map."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
import torch.nn.functional as F  # noqa: E402

from portcheck import compare_backward, compare_forward, convert  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402

D, H = 8, 2
X = np.random.RandomState(0).randn(2, 5, D).astype(np.float32)
Y = np.random.RandomState(1).randn(2, 3).astype(np.float32)


class TorchAttention(torch.nn.Module):
    """table: a per-head bias of the scores the attention holds itself, as BEiT's relative position table."""
    def __init__(self, table=False):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(H, 1, 1)) if table else None
        self.qkv = torch.nn.Linear(D, 3 * D, bias=False)
        self.q_bias = torch.nn.Parameter(torch.randn(D))
        self.register_buffer("k_bias", torch.zeros(D), persistent=False)
        self.v_bias = torch.nn.Parameter(torch.randn(D))
        self.proj = torch.nn.Linear(D, D)

    def forward(self, x):
        b, n, d = x.shape
        qkv = F.linear(x, self.qkv.weight, torch.cat((self.q_bias, self.k_bias, self.v_bias)))
        q, k, v = qkv.reshape(b, n, 3, H, d // H).permute(2, 0, 3, 1, 4).unbind(0)
        scores = q @ k.transpose(-2, -1) * (d // H) ** -0.5
        attn = (scores if self.table is None else scores + self.table).softmax(-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, d))


class TorchModel(torch.nn.Module):
    def __init__(self, table=False):
        super().__init__()
        self.norm, self.attn, self.head = torch.nn.LayerNorm(D), TorchAttention(table), torch.nn.Linear(D, 3)

    def forward(self, x):
        return self.head((x + self.attn(self.norm(x))).mean(1))


class PaddleAttention(paddle.nn.Layer):
    """order: which of the qkv Linear's three outputs its forward reads as q, k and v; scale: its scores'."""
    def __init__(self, order=(0, 1, 2), scale=None, table=False):
        super().__init__()
        self.table = self.create_parameter([H, 1, 1]) if table else None
        self.qkv, self.proj = paddle.nn.Linear(D, 3 * D), paddle.nn.Linear(D, D)
        self.order, self.scale = order, (D // H) ** -0.5 if scale is None else scale

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape([b, n, 3, H, d // H]).transpose([2, 0, 3, 1, 4])
        q, k, v = (qkv[i] for i in self.order)
        scores = q @ k.transpose([0, 1, 3, 2]) * self.scale
        attn = paddle.nn.functional.softmax(scores if self.table is None else scores + self.table, axis=-1)
        return self.proj((attn @ v).transpose([0, 2, 1, 3]).reshape([b, n, d]))


class PaddleModel(paddle.nn.Layer):
    def __init__(self, **attention):
        super().__init__()
        self.norm, self.attn = paddle.nn.LayerNorm(D), PaddleAttention(**attention)
        self.head = paddle.nn.Linear(D, 3)

    def forward(self, x):
        return self.head((x + self.attn(self.norm(x))).mean(1))


@pytest.fixture(scope="module")
def torch_model():
    torch.manual_seed(0)
    return TorchModel().eval()


def test_the_parts_fill_the_ports_bias_in_the_order_the_run_settles_and_forward_is_green(torch_model):
    paddle.seed(0)
    pd = PaddleModel()
    state = convert(torch_model, pd, inputs=X)
    a = torch_model.attn
    want = np.concatenate([a.q_bias.detach().numpy(), np.zeros(D, np.float32), a.v_bias.detach().numpy()])
    assert np.array_equal(pd.attn.qkv.bias.numpy(), want)
    assert "attn.qkv.bias: [q_bias | k_bias (a constant buffer) | v_bias], torch's attn's own" in state.said, state.said
    report = compare_forward(torch_model, pd.eval(), X, isolate=True)
    assert report.passed and report.differing == [], report.table()


@pytest.mark.parametrize("optimizer", [
    (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), lambda p: paddle.optimizer.Momentum(0.1, momentum=0.9,
                                                                                             parameters=p)),
    (lambda p: torch.optim.AdamW(p, lr=1e-3), lambda p: paddle.optimizer.AdamW(1e-3, parameters=p))],
    ids=["momentum", "adamw"])
def test_compare_backward_judges_each_part_and_says_the_constant_one(torch_model, optimizer):
    """AdamW moves Paddle's k part by its gradient's rounding alone (torch holds it constant): its value after a step
    is not judged, its gradient is, and the report says so."""
    mse = lambda o, t: ((o - t) ** 2).mean()  # noqa: E731
    pt, pd = copy.deepcopy(torch_model), PaddleModel()
    convert(pt, pd, inputs=X)
    report = compare_backward(pt.train(), pd.train(), X, Y, loss=(mse, mse), optimizer=optimizer, steps=2)
    assert report.passed, report.table()
    assert any(r.name == "grad attn.qkv.bias" and r.passed for r in report.grads), report.table()
    assert "attn.qkv.bias: 8 of its 24 values a constant on torch's side" in " ".join(report.by_design)


def test_a_table_the_attention_holds_beside_its_parts_is_converted_as_its_own():
    """BEiT's attention holds its relative position table beside q_bias and v_bias; the port's holds it too."""
    torch.manual_seed(0)
    pt, pd = TorchModel(table=True).eval(), PaddleModel(table=True)
    convert(pt, pd, inputs=X)
    assert np.array_equal(pd.attn.table.numpy(), pt.attn.table.detach().numpy())
    report = compare_forward(pt, pd.eval(), X, isolate=True)
    assert report.passed and report.differing == [], report.table()


def test_a_scale_planted_in_the_port_is_red_at_the_attention(torch_model):
    """Red at the code the attention runs between its qkv and its proj, where the scale is."""
    pd = PaddleModel(scale=(D // H) ** -0.5 * 1.01)
    convert(torch_model, pd, inputs=X)
    report = compare_forward(torch_model, pd.eval(), X, isolate=True)
    assert not report.passed and report.differing == ["(model) (before attn.proj)"], report.table()


def test_a_port_reading_k_and_v_swapped_is_refused_naming_the_attention(torch_model):
    with pytest.raises(PipelineError, match=r"^torch's attn holds Paddle's attn.qkv.bias in parts .* no order of "
                                            r"them gives torch's attn .* \[PC447\]$"):
        convert(torch_model, PaddleModel(order=(0, 2, 1)), inputs=X)


def test_without_inputs_the_order_cannot_be_settled_and_convert_says_to_pass_them(torch_model):
    pd = PaddleModel()
    before = pd.attn.qkv.bias.numpy().copy()
    with pytest.raises(PipelineError, match=r"^attn.qkv.bias: \[q_bias \| v_bias \| k_bias \(a constant buffer\)\], "
                                            r"torch's attn's own: .* pass inputs= .* \[PC448\]$"):
        convert(torch_model, pd)
    assert np.array_equal(pd.attn.qkv.bias.numpy(), before)


@pytest.mark.parametrize("scale, red", [(None, None), ((D // H) ** -0.5 * 1.01, "attn")])
def test_two_records_written_apart_are_judged_as_compare_backward_judges_them(torch_model, scale, red):
    """Each side's own record_backward (a torch record knows nothing of the port): torch's parts joined as the port's
    one bias, their order the one nearest Paddle's first gradient; a scale planted in the port red where it is."""
    from portcheck import judge_backward, record_backward
    mse = lambda o, t: ((o - t) ** 2).mean()  # noqa: E731
    pt, pd = copy.deepcopy(torch_model), PaddleModel(scale=scale)
    convert(pt, pd, inputs=X)
    t = record_backward(pt.train(), X, Y, mse, lambda p: torch.optim.AdamW(p, lr=1e-3), steps=2)
    p = record_backward(pd.train(), X, Y, mse, lambda p: paddle.optimizer.AdamW(1e-3, parameters=p), steps=2)
    report = judge_backward(t, p)
    assert report.passed == (red is None) and report.first_diverging == red, report.table()
    assert any(r.name == "grad attn.qkv.bias" for r in report.grads), report.table()


def test_a_part_torch_holds_as_nan_is_no_order_to_settle_and_the_forward_is_red(torch_model):
    broken = copy.deepcopy(torch_model)
    with torch.no_grad():
        broken.attn.q_bias[0] = float("nan")
    pd = PaddleModel()
    state = convert(broken, pd, inputs=X)
    assert "attn.qkv.bias: its parts hold NaN or inf on torch's side, their order not settled" in state.said
    assert not compare_forward(broken, pd.eval(), X).passed
