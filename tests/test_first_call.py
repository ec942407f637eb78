"""report.first_call: inside the module named as where the runs part, the first framework call whose output differs,
named on each side with its source line (portcheck.calls): torchvision's ResNet-18 with a LeakyReLU planted behind
its in-place ReLUs, and a small pre-norm transformer block with a planted GELU approximation."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")

from portcheck import compare_forward, convert  # noqa: E402
from portcheck.core.page import page  # noqa: E402
from portcheck.forward import calls  # noqa: E402
from portcheck.mapping.trace import trace  # noqa: E402

D, H = 16, 2


class TorchBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.qkv, self.proj = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.fc1, self.fc2 = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, n, 3, H, D // H).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // H), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, D))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class PaddleBlock(paddle.nn.Layer):
    def __init__(self, approximate=False, scale=True):
        super().__init__()
        self.ln1, self.ln2 = paddle.nn.LayerNorm(D), paddle.nn.LayerNorm(D)
        self.qkv, self.proj = paddle.nn.Linear(D, 3 * D), paddle.nn.Linear(D, D)
        self.fc1, self.fc2 = paddle.nn.Linear(D, 4 * D), paddle.nn.Linear(4 * D, D)
        self.approximate, self.scale = approximate, scale

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape([b, n, 3, H, D // H]).transpose([2, 0, 3, 1, 4])
        scores = q @ k.transpose([0, 1, 3, 2])
        att = paddle.nn.functional.softmax(scores / math.sqrt(D // H) if self.scale else scores, axis=-1)
        x = x + self.proj((att @ v).transpose([0, 2, 1, 3]).reshape([b, n, D]))
        return x + self.fc2(paddle.nn.functional.gelu(self.fc1(self.ln2(x)), approximate=self.approximate))


X = np.random.RandomState(0).randn(2, 5, D).astype(np.float32)
PADDLE_OWN = paddle.nn.functional.gelu, paddle.Tensor.__add__, paddle.matmul


def block_pair(**plant):
    torch.manual_seed(0)
    t, p = TorchBlock().eval(), PaddleBlock(**plant)
    p.set_state_dict(convert(t, p, inputs=X))
    p.eval()
    return t, p


def source_line(cls, text):
    """The line number of `text` in cls.forward's source."""
    import inspect
    lines, start = inspect.getsourcelines(cls.forward)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_a_planted_gelu_approximation_is_named_at_its_call_and_line_on_each_side():
    report = compare_forward(*block_pair(approximate=True), X)
    # fc2 reads what the block's forward computed: named as the model's own computation, its own calls traced
    assert not report.passed and report.first_diverging == "(model) (before fc2)"
    first = report.first_call
    assert first.found and first.module == ("(model)", "(model)"), first.line()
    assert (first.torch.name, first.paddle.name) == ("torch.nn.functional.gelu", "paddle.nn.functional.gelu")
    assert (first.torch.file, first.paddle.file) == (__file__, __file__)
    assert (first.torch.line, first.paddle.line) == (source_line(TorchBlock, "gelu("), source_line(PaddleBlock, "gelu("))
    assert f"test_first_call.py:{first.paddle.line}" in report.table()
    shown = page(report.view())  # its page names the call and its line on each side, below the verdict
    assert all(f"<b>{side}</b>: {site}" in shown for side, site in (("torch", first.torch), ("paddle", first.paddle)))
    assert f"test_first_call.py:{first.torch.line}" in str(first.torch)
    assert (paddle.nn.functional.gelu, paddle.Tensor.__add__, paddle.matmul) == PADDLE_OWN  # Paddle's own put back


def test_a_missing_scale_is_said_as_a_call_paired_with_none_never_as_a_false_pair():
    report = compare_forward(*block_pair(scale=False), X)
    first = report.first_call
    assert not report.passed and not first.found
    assert "paired with none: torch's torch.Tensor.div" in first.why and \
        f"test_first_call.py:{source_line(TorchBlock, 'softmax(')}" in first.why, first.why
    assert "no framework call named" in report.table()


def test_a_correct_block_has_no_first_call():
    report = compare_forward(*block_pair(), X)
    assert report.passed and report.first_call is None


def test_the_calls_pair_by_name_where_shapes_alone_would_pair_a_missing_call_with_the_next():
    site = lambda name: calls.Site(name, "", 0)
    call = lambda name: calls._Traced(site(name), None, np.zeros(3))
    ts = [call("torch.matmul"), call("torch.Tensor.div"), call("torch.softmax")]
    ps = [call("paddle.matmul"), call("paddle.nn.functional.softmax")]
    assert calls._aligned(ts, ps) == [(0, 0), (2, 1)]


def test_resnet_block_a_leaky_relu_behind_an_in_place_relu_is_named_at_relu_against_leaky_relu():
    """torchvision's BasicBlock against paddle.vision's (ResNet-18's block, alone: the whole model is the zoo's)."""
    from tools.zoo.torchvision_cpu import import_torchvision
    try:
        tv = import_torchvision()
    except ImportError:
        pytest.skip("torchvision is not installed (requirements.txt pins it)")
    from paddle.vision.models.resnet import BasicBlock
    torch.manual_seed(0)
    t = tv.models.resnet.BasicBlock(8, 8).eval()
    p = BasicBlock(8, 8)
    x = np.random.RandomState(0).randn(1, 8, 6, 6).astype(np.float32)
    p.set_state_dict(convert(t, p, inputs=x))
    p.eval()
    p.relu = paddle.nn.LeakyReLU()
    report = compare_forward(t, p, x)
    first = report.first_call
    assert report.first_diverging == "relu" and first.found, first.line()
    assert (first.torch.name, first.paddle.name) == ("torch.nn.functional.relu", "paddle.nn.functional.leaky_relu")
    assert first.torch.file.replace("\\", "/").endswith("torchvision/models/resnet.py")
    assert first.paddle.file.replace("\\", "/").endswith("paddle/vision/models/resnet.py")
    # the block traced whole names the same pair: the in-place ReLU's output as it returned, not as overwritten
    whole = calls.locate(t, p, x, trace(t, x), "(model)", "(model)")
    assert (whole.torch, whole.paddle) == (first.torch, first.paddle), whole.line()


def test_a_module_whose_calls_pass_the_limit_is_said_too_large_to_trace(monkeypatch):
    monkeypatch.setattr(calls, "LIMIT", 1000)
    report = compare_forward(*block_pair(approximate=True), X)
    assert not report.first_call.found and "too large to trace" in report.first_call.why, report.first_call.line()
