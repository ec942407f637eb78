"""A torch module holding what a port's Paddle layers hold apart (portcheck.mapping.torch_fused): timm's and a
hand-written ViT's qkv Linear against q, k and v Linears, converted with no layouts, its layout settled by the run
(one after the other, or per head as GPT-NeoX lays them); green in compare_forward and compare_backward, red where
the port reads k for v; without inputs= the refusal still names the layout to declare."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402

D, HEADS = 16, 4
X = np.random.RandomState(0).randn(2, 5, D).astype("float32")


def pair(per_head=False, plant=None):
    """Two attention blocks: torch's q, k and v in one Linear (columns [q | k | v], or per head with per_head), the
    port's three Linears. plant "k_for_v": the port's attention reads its k projection's output as the values."""
    class TorchBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.qkv, self.proj = torch.nn.LayerNorm(D), torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)

        def forward(self, x):
            b, n, _ = x.shape
            qkv = self.qkv(self.norm(x))
            if per_head:
                q, k, v = qkv.reshape(b, n, HEADS, 3, D // HEADS).permute(3, 0, 2, 1, 4)
            else:
                q, k, v = qkv.reshape(b, n, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-2, -1) * (D // HEADS) ** -0.5, -1) @ v
            return x + self.proj(a.transpose(1, 2).reshape(b, n, D))

    class PortBlock(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm, self.proj = paddle.nn.LayerNorm(D), paddle.nn.Linear(D, D)
            self.q, self.k, self.v = paddle.nn.Linear(D, D), paddle.nn.Linear(D, D), paddle.nn.Linear(D, D)

        def forward(self, x):
            b, n, _ = x.shape
            h = self.norm(x)
            heads = lambda t: t.reshape([b, n, HEADS, D // HEADS]).transpose([0, 2, 1, 3])  # noqa: E731
            q, k, v = heads(self.q(h)), heads(self.k(h)), heads(self.v(h))
            v = k if plant == "k_for_v" else v
            a = paddle.nn.functional.softmax(q @ k.transpose([0, 1, 3, 2]) * (D // HEADS) ** -0.5, -1) @ v
            return x + self.proj(a.transpose([0, 2, 1, 3]).reshape([b, n, D]))

    torch.manual_seed(0)
    pt = torch.nn.Sequential(TorchBlock(), TorchBlock())
    pd = paddle.nn.Sequential(PortBlock(), PortBlock())
    return pt.eval(), pd


@pytest.mark.parametrize("per_head", [False, True], ids=["one_after_the_other", "per_head"])
def test_a_fused_qkv_against_three_linears_converts_with_no_layouts_and_is_green(per_head):
    pt, pd = pair(per_head)
    state = convert(pt, pd, inputs=X)
    pd.set_state_dict(state)
    heads = f"per {HEADS} groups" if per_head else "one after the other"
    assert state.fused_found == {"0.qkv": state.fused_found["0.qkv"], "1.qkv": state.fused_found["0.qkv"]}
    assert f"0.qkv, 1.qkv: their columns [q | k | v] {heads}, settled by a run" in state.said, state.said
    forward = compare_forward(pt, pd, X, isolate=True)
    assert forward.passed, forward.table()
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    opt = (lambda p: torch.optim.SGD(p, lr=0.1), lambda p: paddle.optimizer.SGD(0.1, parameters=p))
    backward = compare_backward(pt, pd, X, np.zeros_like(X), loss, opt, steps=2)
    assert backward.passed, backward.table()


def test_a_port_reading_k_for_v_is_red_at_its_block():
    pt, pd = pair(plant="k_for_v")
    with pytest.raises(PipelineError, match=r"torch's 0.qkv, 1.qkv hold what Paddle's q, k, v hold apart, but no "
                                            r"layout of their columns gives torch's 0 .*\[PC458\]"):
        convert(pt, pd, inputs=X)
    # declared, the port's difference is judged where it is
    pd.set_state_dict(convert(pt, pd, inputs=X, layouts={"qkv": __import__("portcheck").Fused(("q", "k", "v"))}))
    report = compare_forward(pt, pd, X, isolate=True)
    assert not report.passed and report.first_diverging == "0", report.table()


def test_without_inputs_the_refusal_names_the_layout_to_declare():
    pt, pd = pair()
    with pytest.raises(PipelineError, match=r"layouts=\{'qkv': portcheck.Fused\(\('q', 'k', 'v'\)\)\}.*\[PC315\]"):
        convert(pt, pd)
