"""Forms one side holds and the other holds otherwise, converted and compared with no map: a list of bare parameters
(torch's ParameterList, transformers' Reformer axial positions), a bias [out, 1] against [out] (transformers'
ConvBERT SeparableConv1D against paddlenlp's), a table the port builds as a parameter that does not train while
torch computes it (paddlenlp's CTRL pos_encoding), and one torch holds frozen while the port computes it (transformers'
RoFormer sinusoidal positions). Each green clean, red with a plant at its module."""
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402

X = np.random.RandomState(0).randn(2, 6, 8).astype("float32")


def seeded(*models):
    torch.manual_seed(0)
    paddle.seed(0)
    return [m() for m in models]


def test_a_parameter_list_and_a_bias_with_an_axis_of_one_convert_and_train_green_with_no_map():
    """torch's ParameterList [6, 1, 8] and [1, 6, 8] against Paddle's; a separable convolution holding its bias
    [4, 1] and run channels first ([batch, 4, 6]) against one holding [4] and run channels last ([batch, 6, 4]).
    Before: refused, their layout unknown (PC011), then the convolutions with no counterpart (PC315)."""
    class Sep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bias = torch.nn.Conv1d(8, 4, 1, bias=False), torch.nn.Parameter(torch.randn(4, 1))

        def forward(self, x):
            return self.conv(x) + self.bias

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(6, 1, 8)),
                                               torch.nn.Parameter(torch.randn(1, 6, 8))])
            self.sep = Sep()

        def forward(self, x):
            return self.sep(((x + self.pos[0][:, 0]) * self.pos[1][0]).transpose(1, 2))

    class SepPort(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.conv = paddle.nn.Conv1D(8, 4, 1, bias_attr=False, data_format="NLC")
            self.bias = self.create_parameter([4], is_bias=True)

        def forward(self, x):
            return self.conv(x) + self.bias

    class Port(paddle.nn.Layer):
        def __init__(self, plant=None):
            super().__init__()
            self.pos = paddle.nn.ParameterList([self.create_parameter([6, 1, 8]), self.create_parameter([1, 6, 8])])
            self.sep, self.plant = SepPort(), plant

        def forward(self, x):
            first, second = (self.pos[1][0], self.pos[0][:, 0]) if self.plant == "swapped" else \
                (self.pos[0][:, 0], self.pos[1][0])
            return self.sep((x + first) * second).transpose([0, 2, 1])

    pt, pd = seeded(Torch, Port)
    state = convert(pt, pd, inputs=X)
    assert state.origin["pos.1"] == "pos.1" and state.origin["sep.bias"] == "sep.bias"
    assert compare_forward(pt.eval(), pd.eval(), X, isolate=True).passed
    y = np.random.RandomState(1).randn(2, 4, 6).astype("float32")
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    assert compare_backward(pt.train(), pd.train(), X, y, loss=loss, optimizer=sgd, steps=3).passed
    # the port reads the two tables in each other's place (the same shape once indexed)
    pt, pd = seeded(Torch, lambda: Port("swapped"))
    pd.set_state_dict(convert(pt, pd, inputs=X))
    report = compare_forward(pt.eval(), pd.eval(), X)
    assert [r.name for r in report.paired if not r.passed][:1] == ["sep.conv"], report.table()


def sinusoid(n, d, base=10000.0):
    """The sinusoidal table both CTRL ports build: sin of the first d/2 frequencies, then their cos."""
    pos = np.arange(n, dtype="float32")[:, None]
    angles = pos * (base ** (-2 * np.arange(d // 2, dtype="float32") / d))[None]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1).astype("float32")


class Computed(torch.nn.Module):
    """torch computes the table into a plain tensor (transformers' CTRL pos_encoding: no parameter, no buffer)."""
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(8, 8)
        self.pos_encoding = torch.from_numpy(sinusoid(6, 8))

    def forward(self, x):
        return self.w(x + self.pos_encoding)


class Table(paddle.nn.Layer):
    """The port holds the table in an Embedding whose weight does not train (paddlenlp's CTRL), built at init."""
    def __init__(self, base=10000.0):
        super().__init__()
        self.w = paddle.nn.Linear(8, 8)
        self.pos_encoding = paddle.nn.Embedding(6, 8)
        self.pos_encoding.weight.set_value(sinusoid(6, 8, base))
        self.pos_encoding.weight.stop_gradient = True

    def forward(self, x):
        return self.w(x + self.pos_encoding(paddle.arange(6)))


def test_a_table_the_port_holds_frozen_and_torch_computes_is_kept_by_the_keep_its_refusal_names():
    """Before: refused as a Paddle key no torch tensor fills (PC014), with nothing to pass; now its refusal names
    keep=, and pasted, Paddle's own table is judged through what reads it: green, and red built on another base."""
    for base, green in ((10000.0, True), (1000.0, False)):
        pt, pd = seeded(Computed, lambda: Table(base))
        with pytest.raises(PipelineError, match=r"parameter that does not train pos_encoding.weight") as refused:
            convert(pt, pd, inputs=X)
        keep = re.findall(r"keep=\['([^']+)'\]", str(refused.value))
        pd.set_state_dict(convert(pt, pd, inputs=X, keep=keep))
        report = compare_forward(pt.eval(), pd.eval(), X)
        assert report.passed is green, report.table()


class Frozen(torch.nn.Module):
    """torch holds the table in an Embedding it never trains (transformers' RoFormerSinusoidalPositionalEmbedding)."""
    def __init__(self):
        super().__init__()
        self.embed_positions = torch.nn.Embedding(6, 8)
        self.embed_positions.weight = torch.nn.Parameter(torch.from_numpy(sinusoid(6, 8)), requires_grad=False)
        self.w = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.w(x * self.embed_positions(torch.arange(6)))


class Computes(paddle.nn.Layer):
    """The port computes the table in its forward (paddlenlp's RoFormer rotary embedding): no tensor of it."""
    def __init__(self, base=10000.0):
        super().__init__()
        self.w, self.base = paddle.nn.Linear(8, 8), base

    def forward(self, x):
        pos = paddle.arange(6, dtype="float32").unsqueeze(1)
        angles = pos * paddle.pow(paddle.to_tensor(self.base), -2 * paddle.arange(4, dtype="float32") / 8)
        return self.w(x * paddle.concat([paddle.sin(angles), paddle.cos(angles)], axis=-1))


def test_a_table_torch_holds_frozen_and_the_port_computes_needs_no_map():
    """Before: refused, torch's embed_positions with no counterpart (PC315). Now nothing of it is filled, said in
    state.said; the port's own table is judged through what reads it: green, red on another base."""
    for base, green in ((10000.0, True), (1000.0, False)):
        pt, pd = seeded(Frozen, lambda: Computes(base))
        state = convert(pt, pd, inputs=X)
        assert "embed_positions" in state.said and "never trained" in state.said
        report = compare_forward(pt.eval(), pd.eval(), X)
        assert report.passed is green, report.table()
    pt.embed_positions.weight.requires_grad = True  # a table torch trains has a counterpart to fill: still refused
    with pytest.raises(PipelineError, match=r"embed_positions \(Embedding\).*\[PC315\]"):
        convert(pt, pd, inputs=X)


def handed_whole(plant=False):
    """torch's head reads the decoder's hidden states; the port's decoder returns {"last_hidden_state": ...} and its
    head, a type of its own, takes that whole (paddlenlp's OPTLMHead). plant: the port's head adds 1."""
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder, self.head = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.head(torch.tanh(self.decoder(x)))

    class Head(paddle.nn.Layer):  # a type of its own holding a Linear's weight [in, out] and bias
        def __init__(self):
            super().__init__()
            self.weight, self.bias = self.create_parameter([16, 4]), self.create_parameter([4], is_bias=True)

        def forward(self, out):
            return paddle.matmul(out["last_hidden_state"], self.weight) + self.bias + (1.0 if plant else 0.0)

    class Decoder(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.linear = paddle.nn.Linear(8, 16)

        def forward(self, x):
            return {"last_hidden_state": paddle.tanh(self.linear(x))}

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.decoder, self.head = Decoder(), Head()

        def forward(self, x):
            return self.head(self.decoder(x))
    return seeded(Model, Port)


def test_a_module_handed_its_input_inside_a_model_output_is_fed_torchs_values_in_it():
    """Before: isolate=True red at the model (before head): the port's head, handed a dict, did not run on torch's
    values. A plant in the head red at it."""
    pt, pd = handed_whole()
    pd.set_state_dict(convert(pt, pd, inputs=X))
    report = compare_forward(pt.eval(), pd.eval(), X, isolate=True)
    assert report.passed and report.differing == [], report.table()
    pt, pd = handed_whole(plant=True)
    pd.set_state_dict(convert(pt, pd, inputs=X))
    report = compare_forward(pt.eval(), pd.eval(), X, isolate=True)
    assert not report.passed and report.first_diverging == "head" and report.differing[0].startswith("head"), \
        report.table()
