"""paddle.compat's layers known by their type: PaConvert writes every torch.nn.Linear as paddle.compat.nn.Linear,
which holds torch's [out, in] weight. convert transposed it as a classic paddle.nn.Linear and refused the port
(PC014, "make the configs match"), or, its weights all square, transposed them without a word. Each layer of
paddle.compat holding tensors is in mapping.layouts.held_as_torch, by its type: a classic paddle.nn.Linear beside it
keeps its own layout, layouts= stays the explicit form. A square weight no type settles (a port's own Linear class)
is settled by its module run both ways on the recorded input, or refused in one line."""
import importlib
import inspect
import pkgutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
compat = pytest.importorskip("paddle.compat.nn")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402
from portcheck.mapping.layouts import held_as_torch  # noqa: E402
from ports import own_linear, paconvert  # noqa: E402

# arguments that build each layer of paddle.compat and its torch twin with no square tensor: a layer of a Paddle to
# come that these do not build fails the enumeration, so that its layout is looked at before a port meets it
ARGS = {"Linear": (3, 5), "MultiheadAttention": (6, 2), "AvgPool1D": (2,), "AvgPool2D": (2,), "AvgPool3D": (2,),
        "Unfold": (2,)}


def compat_layers():
    """Every Layer class paddle.compat's modules define, once."""
    import paddle.compat
    found = {}
    for info in pkgutil.walk_packages(paddle.compat.__path__, "paddle.compat."):
        module = importlib.import_module(info.name)
        for _, kind in inspect.getmembers(module, inspect.isclass):
            if issubclass(kind, paddle.nn.Layer) and kind.__module__.startswith("paddle.compat"):
                found[kind] = None
    return list(found)


def test_every_layer_of_paddle_compat_holding_tensors_is_known_by_type_with_torchs_shapes():
    held, known = held_as_torch(), []
    for kind in compat_layers():
        takes = [p for p in inspect.signature(kind.__init__).parameters.values() if p.name != "self"
                 and p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
        if takes and kind.__name__ not in ARGS:
            pytest.fail(f"paddle.compat's {kind.__module__}.{kind.__name__} takes {[p.name for p in takes]}: "
                        "add its arguments to ARGS and its layout to held_as_torch if it holds tensors")
        layer = kind(*ARGS.get(kind.__name__, ()))
        if not layer.state_dict():
            continue
        assert kind in held, f"{kind.__module__}.{kind.__name__} holds tensors and has no layout in held_as_torch"
        twin, rule = held[kind]
        theirs = {k: tuple(np.shape(rule(k.rpartition(".")[2], v.detach().numpy())[1]))
                  for k, v in getattr(torch.nn, twin)(*ARGS[kind.__name__]).state_dict().items()}
        assert theirs == {k: tuple(v.shape) for k, v in layer.state_dict().items()}, kind
        known.append(kind.__name__)
    assert sorted(known) == ["Linear", "MultiheadAttention"], known


def _pair(torch_kind, paddle_kind, x, plant=None, layouts=None, inputs=True):
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = torch_kind().eval(), paddle_kind(plant=plant)
    convert(pt, pd, inputs=x if inputs else None, layouts=layouts)
    return pt, pd.eval()


def _trained(pt, pd, x):
    loss = (lambda o, t: (o ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    return compare_backward(pt.train(), pd.train(), x, np.zeros(1, "float32"), loss=loss, optimizer=sgd, steps=2)


def test_paconverts_linears_beside_a_classic_one_each_take_their_own_layout():
    """Before: PC014, stem.weight (16, 24) after the layout rule against Paddle's (24, 16)."""
    x = paconvert.FEATURES
    pt, pd = _pair(paconvert.MixedNet, paconvert.PaConvertMixedNet, x)
    np.testing.assert_array_equal(pd.stem.weight.numpy(), pt.stem.weight.detach().numpy())
    np.testing.assert_array_equal(pd.head.weight.numpy(), pt.head.weight.detach().numpy().T)
    report = compare_forward(pt, pd, x, isolate=True)
    assert report.passed, report.table()
    backward = _trained(pt, pd, x)
    assert backward.passed, backward.table()
    report = compare_forward(*_pair(paconvert.MixedNet, paconvert.PaConvertMixedNet, x, plant="body"), x)
    assert not report.passed and report.first_diverging == "(model) (before head)", report.table()


@pytest.mark.parametrize("inputs", [True, False], ids=["inputs", "no inputs"])
def test_square_compat_linears_are_kept_as_torch_holds_them_with_or_without_a_run(inputs):
    """Before: transposed without a word, the correct port red at layers.0. A compat Linear reading its weight as
    [in, out] is red there; layouts= keyed by the compat type still transposes it (the explicit form)."""
    x = paconvert.FEATURES
    pt, pd = _pair(paconvert.SquareMLP, paconvert.PaConvertSquareMLP, x, inputs=inputs)
    for a, b in zip(pt.layers, pd.layers):
        np.testing.assert_array_equal(b.weight.numpy(), a.weight.detach().numpy())
    report = compare_forward(pt, pd, x)
    assert report.passed, report.table()
    report = compare_forward(*_pair(paconvert.SquareMLP, paconvert.PaConvertSquareMLP, x, "transposed", None, inputs), x)
    assert not report.passed and report.first_diverging == "layers.1", report.table()
    declared = {compat.Linear: "transpose"}
    report = compare_forward(*_pair(paconvert.SquareMLP, paconvert.PaConvertSquareMLP, x, None, declared, inputs), x)
    assert not report.passed and report.first_diverging == "layers.0", report.table()


def test_torchs_multihead_attention_against_paddle_compats_converts_as_it_is():
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn, self.head = torch.nn.MultiheadAttention(8, 2, batch_first=True), torch.nn.Linear(8, 3)

        def forward(self, x):
            return self.head(self.attn(x, x, x, need_weights=False)[0])

    class Port(paddle.nn.Layer):
        def __init__(self, plant=None):
            super().__init__()
            self.attn = compat.MultiheadAttention(8, 2, batch_first=True)
            self.head = compat.Linear(8, 3)
            self.plant = plant

        def forward(self, x):
            k = x[:, ::-1] if self.plant else x
            return self.head(self.attn(x, k, x, need_weights=False)[0])

    x = np.random.RandomState(0).randn(2, 5, 8).astype("float32")
    pt, pd = _pair(Torch, Port, x)
    np.testing.assert_array_equal(pd.attn.in_proj_weight.numpy(), pt.attn.in_proj_weight.detach().numpy())
    assert compare_forward(pt, pd, x).passed
    report = compare_forward(*_pair(Torch, Port, x, plant=True), x)
    assert not report.passed and report.first_diverging == "attn[0]", report.table()


def test_a_square_weight_of_a_ports_own_class_is_settled_by_the_run_or_refused_in_one_line():
    """A port's own Linear class holding torch's [out, in], its weights square: neither its type nor its shape says
    the layout. Without inputs= refused, every such module named; with them each module is run both ways on torch's
    recorded input and keeps the layout giving torch's output (before: transposed without a word, red at layers.0);
    compare_backward takes the layout the converted model holds. A bug inside the module leaves neither layout
    torch's: Paddle's [in, out] kept and said, the module red (a refusal would hide where the port differs)."""
    x = own_linear.FEATURES
    with pytest.raises(PipelineError) as e:
        _pair(own_linear.SquareMLP, own_linear.OwnLinearMLP, x, inputs=False)
    said = str(e.value)
    assert said.startswith("torch layers.0 is a Linear and Paddle layers.0 a TorchLayoutLinear holding layers.0's "
                           "weight as weight, square: either layout fits; pass layouts={'TorchLayoutLinear': 'same'}")
    assert "or pass inputs= for convert to run it both ways on them (so too layers.1, layers.2) [PC455]" in said
    assert "\n" not in said
    pt, pd = _pair(own_linear.SquareMLP, own_linear.OwnLinearMLP, x)
    for a, b in zip(pt.layers, pd.layers):
        np.testing.assert_array_equal(b.weight.numpy(), a.weight.detach().numpy())
    report = compare_forward(pt, pd, x, isolate=True)
    assert report.passed, report.table()
    backward = _trained(pt, pd, x)
    assert backward.passed, backward.table()
    report = compare_forward(*_pair(own_linear.SquareMLP, own_linear.OwnLinearMLP, x, plant="relu"), x)
    assert not report.passed and report.first_diverging == "(model) (before layers.2)", report.table()
    torch.manual_seed(0)
    pt, pd = own_linear.SquareMLP().eval(), own_linear.OwnLinearMLP(plant="bias")
    said = convert(pt, pd, inputs=x).said
    assert "torch layers.1's square weight in Paddle layers.1: run both ways on torch's recorded input, neither " \
           "layout gives torch's output (transposed" in said and "kept transposed" in said, said
    np.testing.assert_array_equal(pd.layers[1].weight.numpy(), pt.layers[1].weight.detach().numpy().T)
    report = compare_forward(pt, pd.eval(), x)
    assert not report.passed and report.first_diverging == "layers.1", report.table()


def test_transformers_conv1d_against_compat_linears_is_transposed_square_or_not():
    """GPT-2's Conv1D holds [in, out], as a classic paddle.nn.Linear does; a compat Linear holds torch's [out, in]:
    each Conv1D weight is transposed into it, the square one too (its type's rule, no run needed). The square one
    copied as Conv1D holds it, as a hand conversion reading compat as classic would, is red there."""
    conv1d = pytest.importorskip("transformers.pytorch_utils").Conv1D

    class Torch(torch.nn.Module):  # GPT-2's MLP, with a square layer between
        def __init__(self):
            super().__init__()
            self.c_fc, self.c_sq, self.c_proj = conv1d(12, 8), conv1d(12, 12), conv1d(8, 12)

        def forward(self, x):
            return self.c_proj(torch.tanh(self.c_sq(torch.tanh(self.c_fc(x)))))

    class Port(paddle.nn.Layer):
        def __init__(self, plant=None):
            super().__init__()
            self.c_fc, self.c_sq, self.c_proj = compat.Linear(8, 12), compat.Linear(12, 12), compat.Linear(12, 8)

        def forward(self, x):
            return self.c_proj(paddle.tanh(self.c_sq(paddle.tanh(self.c_fc(x)))))

    x = np.random.RandomState(0).randn(2, 8).astype("float32")
    pt, pd = _pair(Torch, Port, x)
    for name in ("c_fc", "c_sq", "c_proj"):
        np.testing.assert_array_equal(getattr(pd, name).weight.numpy(), getattr(pt, name).weight.detach().numpy().T)
    report = compare_forward(pt, pd, x, isolate=True)
    assert report.passed, report.table()
    pd.c_sq.weight.set_value(pt.c_sq.weight.detach().numpy())
    report = compare_forward(pt, pd, x)
    assert not report.passed and report.first_diverging == "c_sq", report.table()


def test_paddlenlps_own_linear_holding_torchs_layout_is_known_by_type():
    """paddlenlp.layers.Linear holds torch's [out, in] weight (the LM heads of paddlenlp's CTRL, RoBERTa, BERT): known
    by its type as paddle.compat's Linear, filled as torch holds it beside a classic paddle.nn.Linear transposed;
    green, and its rows swapped (a port reading another row order) red at it."""
    from paddlenlp.layers import Linear as TorchHeld

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj, self.head = torch.nn.Linear(3, 5), torch.nn.Linear(5, 7)

        def forward(self, x):
            return self.head(self.proj(x))

    class Paddle(paddle.nn.Layer):
        def __init__(self, plant=None):
            super().__init__()
            self.proj, self.head = paddle.nn.Linear(3, 5), TorchHeld(5, 7)

        def forward(self, x):
            return self.head(self.proj(x))
    x = np.random.RandomState(0).randn(2, 3).astype("float32")
    held = held_as_torch()
    assert held[TorchHeld] == ("Linear", held[TorchHeld][1])
    pt, pd = _pair(Torch, Paddle, x)
    assert list(pd.head.weight.shape) == [7, 5] and list(pd.proj.weight.shape) == [3, 5]
    assert compare_forward(pt, pd, x).passed
    pd.head.weight.set_value(pd.head.weight.numpy()[::-1].copy())  # its rows in another order
    report = compare_forward(pt, pd, x)
    assert not report.passed and report.first_diverging.startswith("head"), report.table()


@pytest.mark.parametrize("plant", [None, "k and v weights swapped", "k and v biases swapped"])
def test_torchs_attention_of_other_key_widths_against_paddle_compats_converts_as_it_is(plant):
    """torch's MultiheadAttention with kdim and vdim holds q, k and v's weights apart and their biases in one
    in_proj_bias [3E]; paddle.compat's holds the biases apart too (q_proj_bias ...). Before: refused, "no unpaired
    Paddle module holds tensors of their sizes" [PC315]. Each third of in_proj_bias fills its part, by the compat
    type; the correct port green, forward and backward, a port reading k's projection for v's red at attn."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True, kdim=4, vdim=4)
            self.head = torch.nn.Linear(8, 3)
            torch.nn.init.normal_(self.attn.in_proj_bias)  # zeros as built; a trained model's are not

        def forward(self, q, kv):
            return self.head(self.attn(q, kv, kv, need_weights=False)[0])

    class Port(paddle.nn.Layer):
        def __init__(self, plant=None):
            super().__init__()
            self.attn = compat.MultiheadAttention(8, 2, batch_first=True, kdim=4, vdim=4)
            self.head = compat.Linear(8, 3)

        def forward(self, q, kv):
            return self.head(self.attn(q, kv, kv, need_weights=False)[0])

    r = np.random.RandomState(0)
    x = {"q": r.randn(2, 5, 8).astype("float32"), "kv": r.randn(2, 7, 4).astype("float32")}
    pt, pd = _pair(Torch, Port, x)
    bias = pt.attn.in_proj_bias.detach().numpy()
    for p, part in enumerate(("q", "k", "v")):
        np.testing.assert_array_equal(getattr(pd.attn, f"{part}_proj_bias").numpy(), bias[8 * p:8 * (p + 1)])
        np.testing.assert_array_equal(getattr(pd.attn, f"{part}_proj_weight").numpy(),
                                      getattr(pt.attn, f"{part}_proj_weight").detach().numpy())
    if plant is None:
        assert compare_forward(pt, pd, x, isolate=True).passed
        backward = _trained(pt, pd, x)
        assert backward.passed, backward.table()
        return
    k, v = (pd.attn.k_proj_weight, pd.attn.v_proj_weight) if "weights" in plant else \
        (pd.attn.k_proj_bias, pd.attn.v_proj_bias)
    held = k.numpy()
    k.set_value(v.numpy())
    v.set_value(held)
    report = compare_forward(pt, pd, x)
    assert not report.passed and report.first_diverging == "attn[0]", report.table()
