"""The layouts PaddleFormers ports use, written by hand in both frameworks (no paddleformers needed): a qkv_proj
fused per key-value group with parts of unequal width ([q of the group's heads | k | v], repeated per group) and an
up_gate_proj [gate | up], against transformers' q_proj, k_proj, v_proj, gate_proj and up_proj. Each converts and
compares with no map, its layouts declared (recipes.paddleformers) or the refusal naming them, never saying the
models differ; a plant in the port's forward (q and k read in another order within a group, gate and up swapped)
is red at its module."""
import re

import numpy as np
import pytest

import portcheck.core.runtime  # noqa: F401 (first: threads, quiet notices)
from portcheck import compare_forward, convert
from portcheck.core.errors import PipelineError
from portcheck.mapping.fused import Fused
from portcheck.mapping.recipes import paddleformers

H, HEADS, KV, D, FF = 32, 4, 2, 8, 48  # hidden, query heads, key-value heads, head size, MLP width


def torch_block():
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj = nn.Linear(H, HEADS * D, bias=True), nn.Linear(H, KV * D, bias=True)
            self.v_proj, self.o_proj = nn.Linear(H, KV * D, bias=True), nn.Linear(HEADS * D, H, bias=False)

        def forward(self, x):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, HEADS, D).transpose(1, 2)
            k = self.k_proj(x).view(b, s, KV, D).transpose(1, 2).repeat_interleave(HEADS // KV, 1)
            v = self.v_proj(x).view(b, s, KV, D).transpose(1, 2).repeat_interleave(HEADS // KV, 1)
            a = torch.softmax(q @ k.transpose(-1, -2) / D ** 0.5, -1) @ v
            return self.o_proj(a.transpose(1, 2).reshape(b, s, HEADS * D))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj, self.up_proj = nn.Linear(H, FF, bias=False), nn.Linear(H, FF, bias=False)
            self.down_proj = nn.Linear(FF, H, bias=False)

        def forward(self, x):
            return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn, self.mlp = Attention(), MLP()

        def forward(self, x):
            x = x + self.self_attn(x)
            return x + self.mlp(x)

    torch.manual_seed(0)
    return Block().eval()


def paddle_block(qkv_order=("q", "k", "v"), gate_first=True, flat=False):
    """paddleformers' layouts: qkv_proj reshaped [batch, seq, kv heads, (group + 2) * head size] and split [q | k | v]
    (qkv_order: the order the port's forward reads them in); up_gate_proj [gate | up] split in two (gate_first
    False: read as [up | gate]); flat: the attention handed its input flattened, [batch * seq, hidden], as a
    sequence-parallel port hands it, its shape beside it."""
    import paddle
    from paddle import nn

    class Attention(nn.Layer):
        def __init__(self):
            super().__init__()
            self.qkv_proj = nn.Linear(H, (HEADS + 2 * KV) * D)
            self.o_proj = nn.Linear(HEADS * D, H, bias_attr=False)

        def forward(self, x, shape=None):
            x = x if shape is None else x.reshape(shape)
            b, s, _ = x.shape
            mix = self.qkv_proj(x).reshape([b, s, KV, (HEADS // KV + 2) * D])
            widths = {"q": HEADS // KV * D, "k": D, "v": D}
            parts = dict(zip(qkv_order, paddle.split(mix, [widths[n] for n in qkv_order], axis=-1)))
            q = parts["q"].reshape([b, s, HEADS, D]).transpose([0, 2, 1, 3])
            k = parts["k"].transpose([0, 2, 1, 3]).repeat_interleave(HEADS // KV, 1)
            v = parts["v"].transpose([0, 2, 1, 3]).repeat_interleave(HEADS // KV, 1)
            a = paddle.nn.functional.softmax(q @ k.transpose([0, 1, 3, 2]) / D ** 0.5, -1) @ v
            return self.o_proj(a.transpose([0, 2, 1, 3]).reshape([b, s, HEADS * D]))

    class MLP(nn.Layer):
        def __init__(self):
            super().__init__()
            self.up_gate_proj = nn.Linear(H, 2 * FF, bias_attr=False)
            self.down_proj = nn.Linear(FF, H, bias_attr=False)

        def forward(self, x):
            gate, up = self.up_gate_proj(x).chunk(2, axis=-1)
            gate, up = (gate, up) if gate_first else (up, gate)
            return self.down_proj(nn.functional.silu(gate) * up)

    class Block(nn.Layer):
        def __init__(self):
            super().__init__()
            self.self_attn, self.mlp = Attention(), MLP()

        def forward(self, x):
            x = x + (self.self_attn(x.reshape([-1, H]), shape=x.shape) if flat else self.self_attn(x))
            return x + self.mlp(x)

    paddle.seed(1)
    block = Block()
    block.eval()
    return block


X = np.random.RandomState(0).randn(2, 5, H).astype("float32")
LAYOUTS = paddleformers(num_attention_heads=HEADS, num_key_value_heads=KV)


def test_the_recipe_declares_qkv_per_key_value_group_with_parts_of_unequal_width():
    assert LAYOUTS["qkv_proj"] == Fused(("q_proj", "k_proj", "v_proj"), heads=KV, widths=(HEADS // KV, 1, 1))
    assert LAYOUTS["up_gate_proj"] == Fused(("gate_proj", "up_proj"))
    q, k, v = LAYOUTS["qkv_proj"].columns((HEADS + 2 * KV) * D)
    group = (HEADS // KV + 2) * D  # the second group's q starts where the first group's v ends
    assert list(q[:2 * D]) == list(range(2 * D)) and q[2 * D] == group and list(k[:D]) == list(range(2 * D, 3 * D))


@pytest.mark.parametrize("isolate", [False, True])
def test_a_paddleformers_layout_converts_and_compares_green_with_no_map(isolate):
    pt, pd = torch_block(), paddle_block()
    convert(pt, pd, inputs=X, layouts=LAYOUTS)
    report = compare_forward(pt, pd, X, layouts=LAYOUTS, isolate=isolate)
    assert report.passed, report.first_diverging
    pairs = report.pairing.modules()
    assert pairs["self_attn.k_proj"] == "self_attn.qkv_proj.k_proj" and pairs["mlp.up_proj"] == "mlp.up_gate_proj.up_proj"


def test_with_no_layouts_convert_settles_each_fused_layout_by_a_run_and_says_which():
    pt, pd = torch_block(), paddle_block()
    state = convert(pt, pd, inputs=X)
    assert state.fused_found == {"self_attn.qkv_proj": LAYOUTS["qkv_proj"],
                                 "mlp.up_gate_proj": LAYOUTS["up_gate_proj"]}, state.fused_found
    assert "self_attn.qkv_proj: their columns [q_proj x2 | k_proj | v_proj] per 2 groups, settled by a run: " \
           "self_attn" in state.said and "mlp.up_gate_proj: their columns [gate_proj | up_proj] one after the " \
           "other" in state.said, state.said
    assert compare_forward(pt, pd, X, layouts=state.fused_found, isolate=True).passed


def test_the_first_layout_giving_torchs_values_is_kept_and_the_rest_not_run():
    """Each kind's candidates run in turn until one gives torch's parent within SETTLED: [gate | up] one after the
    other is the first tried, the other 9 never run; the qkv layout per 2 groups the second, after one that is far."""
    state = convert(torch_block(), paddle_block(), inputs=X)
    assert "[gate_proj | up_proj] one after the other, settled by a run: mlp " in state.said and \
        "of its scale from torch's mlp (9 more not run)" in state.said, state.said
    assert re.search(r"per 2 groups, settled by a run: self_attn \S+ of its scale from torch's self_attn \(the 1 "
                     r"layout run before it [\d.]+, 3 more not run\)", state.said), state.said


def test_a_parent_its_run_cannot_feed_torchs_input_is_settled_by_the_whole_converted_models_run():
    """The attention handed its input flattened ([batch * seq, hidden] against torch's [batch, seq, hidden]) is not
    fed torch's recorded input: judged alone (nothing else converted), no layout could give torch's values, so the
    whole converted model's run settles it, as every layout was settled before."""
    pt, pd = torch_block(), paddle_block(flat=True)
    state = convert(pt, pd, inputs=X)
    assert state.fused_found == {"self_attn.qkv_proj": LAYOUTS["qkv_proj"],
                                 "mlp.up_gate_proj": LAYOUTS["up_gate_proj"]}, state.said
    assert compare_forward(pt, pd, X, layouts=state.fused_found, isolate=True).passed


@pytest.mark.parametrize("plant, where", [({"qkv_order": ("k", "q", "v")}, "self_attn"),
                                          ({"gate_first": False}, "mlp")])
def test_a_port_reading_its_columns_in_no_candidate_layout_is_refused_naming_each_and_how_far(plant, where):
    pt, pd = torch_block(), paddle_block(**plant)
    before = {k: v.numpy().copy() for k, v in pd.state_dict().items()}
    with pytest.raises(PipelineError, match=r"\[PC456\]") as e:
        convert(pt, pd, inputs=X)
    line = str(e.value)
    assert f"gives torch's {where} on the run" in line and "one after the other" in line and "per 2 groups" in line
    assert all(np.array_equal(v.numpy(), before[k]) for k, v in pd.state_dict().items())  # left as it was


def test_without_inputs_the_refusal_names_the_entries_and_never_says_the_models_differ():
    with pytest.raises(PipelineError) as e:
        convert(torch_block(), paddle_block())
    line = str(e.value)
    assert "'qkv_proj': portcheck.Fused(('q_proj', 'k_proj', 'v_proj'), widths=(2, 1, 1))" in line, line
    assert "'up_gate_proj': portcheck.Fused(('gate_proj', 'up_proj'))" in line and "heads= the key-value heads" in line
    assert "differ" not in line and "[PC315]" in line


@pytest.mark.parametrize("plant, where", [({"qkv_order": ("k", "q", "v")}, "self_attn"),
                                          ({"gate_first": False}, "mlp")])
def test_a_port_reading_its_fused_columns_in_another_order_is_red_at_its_module(plant, where):
    pt, pd = torch_block(), paddle_block(**plant)
    convert(pt, pd, inputs=X, layouts=LAYOUTS)
    for isolate in (False, True):
        report = compare_forward(pt, pd, X, layouts=LAYOUTS, isolate=isolate)
        assert not report.passed and report.first_diverging.partition("[")[0] == where, report.first_diverging


def test_the_layout_declared_one_after_the_other_where_the_port_goes_per_group_is_red():
    pt, pd = torch_block(), paddle_block()
    wrong = {**LAYOUTS, "qkv_proj": Fused(("q_proj", "k_proj", "v_proj"), widths=(HEADS // KV, 1, 1))}
    convert(pt, pd, inputs=X, layouts=wrong)
    report = compare_forward(pt, pd, X, layouts=wrong)
    assert not report.passed and report.first_diverging.partition("[")[0] == "self_attn", report.first_diverging


def test_fused_widths_are_checked_in_one_line():
    with pytest.raises(PipelineError, match=r"\[PC324\]"):
        Fused(("q", "k", "v"), widths=(2, 1))
    assert Fused(("q", "k"), widths=(3, 3)) == Fused(("q", "k"))  # one width: as if none were given


def test_a_tie_of_two_like_named_projections_is_no_fusion_of_one_name_twice():
    """Two layers' gate_proj of one shape tie for one Paddle module: they are no parts of one fused module (a
    Fused(('gate_proj', 'gate_proj')) raised PC309 inside the pairing)."""
    from portcheck.mapping.alignment import Call
    from portcheck.mapping.ties import fusions_of
    gate = lambda i: Call(f"layers.{i}.mlp.gate_proj", "Linear", 0, ((32, 48),), ((2, 5, 48),))
    fused_call = Call("layers.0.mlp.up_gate_proj", "Linear", 0, ((32, 96),), ((2, 5, 96),))
    ts, ps = [gate(0), gate(1)], [fused_call, Call("layers.0.mlp.x", "Linear", 0, ((32, 48),), ((2, 5, 48),))]
    assert fusions_of([([0, 1], 1)], ts, ps, ts, ps) == {}
    up = Call("layers.0.mlp.up_proj", "Linear", 0, ((32, 48),), ((2, 5, 48),))
    assert fusions_of([([0, 1], 1)], [gate(0), up], ps, [gate(0), up], ps) == {"up_gate_proj": ("gate_proj", "up_proj")}


E, I, K = 4, 12, 2  # experts, expert width, experts per token


def torch_moe():
    """transformers 5's layout: a router holding weight [E, H] read with F.linear, returning probabilities, and the
    experts packed, gate_up_proj [E, 2I, H] and down_proj [E, H, I], read one expert at a time."""
    import torch
    from torch import nn

    class Router(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(E, H) * 0.3)

        def forward(self, x):
            probs = torch.softmax(nn.functional.linear(x, self.weight), -1)
            top, index = probs.topk(K, -1)
            return probs, top / top.sum(-1, keepdim=True), index

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
            _, weights, index = self.gate(flat)
            return self.experts(flat, index, weights).reshape(x.shape)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = MoE()

        def forward(self, x):
            return x + self.mlp(x)

    torch.manual_seed(0)
    return Model().eval()


def paddle_moe(shift=0, softmax_axis=-1, fused=True):
    """paddleformers' layout: a Linear gate returning logits, one module per expert (up_gate_proj [gate | up],
    down_proj; fused=False: gate_proj and up_proj, as paddleformers' DeepSeek-V3 experts). shift: expert e's tokens
    sent to module (e + shift) % E; softmax_axis: the axis the port softmaxes."""
    import paddle
    from paddle import nn

    class MLP(nn.Layer):
        def __init__(self):
            super().__init__()
            if fused:
                self.up_gate_proj = nn.Linear(H, 2 * I, bias_attr=False)
            else:
                self.gate_proj, self.up_proj = nn.Linear(H, I, bias_attr=False), nn.Linear(H, I, bias_attr=False)
            self.down_proj = nn.Linear(I, H, bias_attr=False)

        def forward(self, x):
            gate, up = self.up_gate_proj(x).chunk(2, axis=-1) if fused else (self.gate_proj(x), self.up_proj(x))
            return self.down_proj(nn.functional.silu(gate) * up)

    class MoE(nn.Layer):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(H, E, bias_attr=False)
            self.experts = nn.LayerList([MLP() for _ in range(E)])

        def forward(self, x):
            flat = x.reshape([-1, H])
            logits = self.gate(flat)
            weights, index = paddle.topk(nn.functional.softmax(logits, axis=softmax_axis), K, axis=-1)
            weights = weights / weights.sum(-1, keepdim=True)
            out = paddle.zeros_like(flat)
            for e in range(E):
                rows, slot = paddle.nonzero(index == e, as_tuple=True)
                if rows.shape[0]:
                    rows, slot = rows.reshape([-1]), slot.reshape([-1])
                    y = self.experts[(e + shift) % E](flat[rows]) * weights[rows, slot].unsqueeze(-1)
                    out = paddle.index_add(out, rows, 0, y)
            return out.reshape(x.shape), logits

    class Model(nn.Layer):
        def __init__(self):
            super().__init__()
            self.mlp = MoE()

        def forward(self, x):
            return x + self.mlp(x)[0]

    paddle.seed(1)
    model = Model()
    model.eval()
    return model


X_MOE = np.random.RandomState(1).randn(2, 6, H).astype("float32")


def test_packed_experts_convert_by_index_and_a_router_of_probabilities_against_logits_is_green():
    pt, pd = torch_moe(), paddle_moe()
    convert(pt, pd, inputs=X_MOE)
    np.testing.assert_array_equal(pd.mlp.experts[2].up_gate_proj.weight.numpy(),
                                  pt.mlp.experts.gate_up_proj[2].detach().numpy().T)
    for isolate in (False, True):
        report = compare_forward(pt, pd, X_MOE, isolate=isolate)
        assert report.passed, (report.first_diverging, [r.line() for r in report.routing])
    row = next(r for r in report.rows if r.key == "mlp.gate[0]")
    assert "probabilities" in row.by_design and report.routing and not report.routing[0].red
    assert report.pairing.modules()["mlp.experts.3.down_proj"] == "mlp.experts.3.down_proj"


def test_experts_shifted_by_one_index_are_red_at_the_block():
    pt, pd = torch_moe(), paddle_moe(shift=1)
    convert(pt, pd, inputs=X_MOE)
    report = compare_forward(pt, pd, X_MOE)
    assert not report.passed and report.first_diverging.partition("[")[0] == "mlp", report.first_diverging


def test_a_router_softmaxing_another_axis_is_red_at_the_router():
    pt, pd = torch_moe(), paddle_moe(softmax_axis=0)
    convert(pt, pd, inputs=X_MOE)
    report = compare_forward(pt, pd, X_MOE)
    assert not report.passed and any(r.red for r in report.routing), [r.line() for r in report.routing]
    assert "gate" in report.routing[0].line() and "[PC430]" in report.routing[0].line()


def test_experts_refusing_float64_are_run_eagerly_by_the_yardstick_and_said_so():
    """transformers 5's grouped experts raise on float64 ("Expected mat_a to be Float32"): the float64 twin runs
    their eager loop (config._experts_implementation = "eager"), said in one line, and every row is judged."""
    import types as namespace
    pt, pd = torch_moe(), paddle_moe()
    experts = pt.mlp.experts
    experts.config = namespace.SimpleNamespace(_experts_implementation="grouped_mm")
    eager = type(experts).forward

    def grouped(self, x, index, weights):
        if self.config._experts_implementation != "eager" and str(x.dtype) == "torch.float64":
            raise RuntimeError("Expected mat_a to be Float32, BFloat16 or Float16 matrix, got Double")
        return eager(self, x, index, weights)
    experts.forward = grouped.__get__(experts)
    convert(pt, pd, inputs=X_MOE)
    report = compare_forward(pt, pd, X_MOE)
    assert report.passed, report.first_diverging
    assert any("eager loop" in line and "'grouped_mm'" in line for line in report.outputs_said), report.outputs_said
    assert experts.config._experts_implementation == "grouped_mm"  # put back


def test_packed_gate_up_against_each_experts_gate_proj_and_up_proj_converts_by_halves_and_is_green():
    """transformers' gate_up_proj [E, 2I, H], chunked gate then up, against an expert holding gate_proj and up_proj
    (paddleformers' DeepSeek-V3 experts): each half of each expert's rows fills its own Linear."""
    pt, pd = torch_moe(), paddle_moe(fused=False)
    convert(pt, pd, inputs=X_MOE)
    up = pt.mlp.experts.gate_up_proj[1, I:].detach().numpy().T
    np.testing.assert_array_equal(pd.mlp.experts[1].up_proj.weight.numpy(), up)
    report = compare_forward(pt, pd, X_MOE)
    assert report.passed, report.first_diverging


def test_probabilities_against_logits_outside_a_router_are_red():
    """Only a router's two forms are one: a classifier softmaxing on one side and not on the other is red."""
    import paddle
    import torch
    from torch import nn

    class Torch(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(H, 5)

        def forward(self, x):
            return torch.softmax(self.head(x), -1)

    class Paddle(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.head = paddle.nn.Linear(H, 5)

        def forward(self, x):
            return self.head(x)

    torch.manual_seed(0)
    pt, pd = Torch().eval(), Paddle()
    x = X.reshape(-1, H)
    convert(pt, pd, inputs=x)
    report = compare_forward(pt, pd, x)
    assert not report.passed and report.first_diverging == "(model)", report.first_diverging


def test_a_router_of_its_own_type_takes_the_one_layout_its_paddle_shapes_allow_and_said():
    """A router of a type no table knows, its weight [experts, hidden] beside a score bias, against a Paddle router
    of its own holding them [hidden, experts]: transposed, the only layout the shapes allow, said in one line; its
    own bias kept as it is. Its output, top-k on the Paddle side where torch returns logits, pairs it by its name."""
    import paddle
    import torch
    from torch import nn

    class TorchRouter(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(4, H))
            self.register_buffer("bias", torch.randn(4))

        def forward(self, x):
            return nn.functional.linear(x, self.weight) + self.bias

    class PaddleRouter(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.weight = self.create_parameter([H, 4])
            self.register_buffer("bias", paddle.zeros([4]))

        def forward(self, x):
            return paddle.topk(x @ self.weight + self.bias, 2, axis=-1)[0]

    class TorchBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.gate = nn.LayerNorm(H), TorchRouter()

        def forward(self, x):
            return self.gate(self.norm(x))

    class PaddleBlock(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm, self.gate = paddle.nn.LayerNorm(H), PaddleRouter()

        def forward(self, x):
            return self.gate(self.norm(x))
    torch.manual_seed(0)
    pt, pd = TorchBlock().eval(), PaddleBlock()
    state = convert(pt, pd, inputs=X)
    assert "torch gate.weight [4, 32] -> Paddle gate.weight: held by its TorchRouter itself, transposed, the one " \
           "layout Paddle's shape takes" in state.said, state.said
    assert np.array_equal(pd.gate.weight.numpy(), pt.gate.weight.detach().numpy().T)
    assert np.array_equal(pd.gate.bias.numpy(), pt.gate.bias.numpy())


def test_compare_backward_with_no_layouts_takes_the_layout_the_paddle_model_holds_and_a_wrong_one_is_red():
    """A pair converted before (convert, or the port's own converter), compared with no layouts: each fused module
    in the layout its Paddle tensors hold, said, each part judged; a converter that wrote the qkv columns one after
    the other where the port reads them per key-value group is red at the attention."""
    import paddle
    import torch
    from portcheck import compare_backward
    target = np.random.RandomState(1).randn(2, 5, H).astype("float32")
    loss = (lambda o, y: ((o - y) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.01), lambda ps: paddle.optimizer.SGD(0.01, parameters=ps))
    for layouts, green in ((LAYOUTS, True),
                           ({**LAYOUTS, "qkv_proj": Fused(("q_proj", "k_proj", "v_proj"), widths=(2, 1, 1))}, False)):
        pt, pd = torch_block(), paddle_block()
        convert(pt, pd, inputs=X, layouts=layouts)
        report = compare_backward(pt.train(), pd.train(), X, target, loss=loss, optimizer=sgd, steps=1)
        assert report.passed == green, report.table()
        assert report.fused_found["self_attn.qkv_proj"] == layouts["qkv_proj"], report.fused_found
        assert green or report.forward.first_diverging.partition("[")[0] == "self_attn", report.forward.first_diverging


def packed_experts(side, held="swapped", plant=False):
    """Experts packed in 3-D tensors by a type of its own on each side, each token sent to expert (row % E):
    transformers 5's gate_up_proj [E, 2I, H] and down_proj [E, H, I] read with F.linear; paddleformers' own
    [E, H, 2I] and [E, I, H] read x @ W (held "swapped"), or torch's axis order read as F.linear reads it ("same").
    plant: two experts' rows swapped in the Paddle forward."""
    if side == "torch":
        import torch
        from torch import nn

        class Experts(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate_up_proj = nn.Parameter(torch.randn(E, 2 * I, H) * 0.2)
                self.down_proj = nn.Parameter(torch.randn(E, H, I) * 0.2)

            def forward(self, x):
                out = torch.zeros_like(x)
                for row in range(x.shape[0]):
                    gate, up = nn.functional.linear(x[row], self.gate_up_proj[row % E]).chunk(2, -1)
                    out[row] = nn.functional.linear(nn.functional.silu(gate) * up, self.down_proj[row % E])
                return out
        torch.manual_seed(0)
        return Experts().eval()
    import paddle

    class Experts(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            shapes = ([E, H, 2 * I], [E, I, H]) if held == "swapped" else ([E, 2 * I, H], [E, H, I])
            self.gate_up_proj, self.down_proj = (self.create_parameter(s) for s in shapes)

        def forward(self, x):
            rows = []
            for row in range(x.shape[0]):
                e = (row + plant) % E
                w, d = self.gate_up_proj[e], self.down_proj[e]
                w, d = (w, d) if held == "swapped" else (w.T, d.T)
                gate, up = (x[row] @ w).chunk(2, axis=-1)
                rows.append(paddle.nn.functional.silu(gate) * up @ d)
            return paddle.stack(rows)
    return Experts()


@pytest.mark.parametrize("held", ["swapped", "same"])
def test_experts_packed_in_either_axis_order_convert_with_no_layouts_and_a_plant_is_red(held):
    """paddleformers' own 3-D experts ([E, H, 2I], its fd_fallback's MoeExperts) against transformers' [E, 2I, H]:
    the one layout the shapes take (the last two axes swapped, or as it is), said; green; the port reading each
    token's expert one off red."""
    x = X_MOE.reshape(-1, H)[:8]
    pt, pd = packed_experts("torch"), packed_experts("paddle", held)
    state = convert(pt, pd, inputs=x)
    assert f"torch down_proj [4, 32, 12] -> Paddle down_proj: held by its Experts itself, " \
           f"{'its last two axes swapped' if held == 'swapped' else 'as it is'}, the one layout" in state.said, state.said
    assert compare_forward(pt, pd, x).passed
    pt, pd = packed_experts("torch"), packed_experts("paddle", held, plant=True)
    convert(pt, pd, inputs=x)
    assert not compare_forward(pt, pd, x).passed
