"""paddleformers' own layouts against transformers 5's, on tiny random configs (PaddleFormers environment only):
Qwen3's qkv_proj per key-value group and up_gate_proj [gate | up], settled by convert's run with no map, GLM-4-MoE's
router of its own type placed by its weight's shape, Qwen3-MoE's one module
per expert against transformers' packed [E, 2I, H] experts and its router of probabilities against paddleformers'
logits, the float64 yardstick run with the experts' eager loop where their grouped implementation refuses float64.
Each correct port green; a plant red at its module."""
import numpy as np
import pytest
import torch

SIZES = dict(vocab_size=99, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=64, use_cache=False)
IDS = np.random.RandomState(0).randint(0, 99, (2, 8)).astype("int64")


def _pair(family, **extra):
    import paddleformers  # noqa: F401 (first: transformers then sees torch, as paddleformers leaves it)
    import importlib
    hf = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    cfg = importlib.import_module(f"transformers.models.{family}")
    pd = importlib.import_module(f"paddleformers.transformers.{family}.modeling")
    pd_cfg = importlib.import_module(f"paddleformers.transformers.{family}.configuration")
    name = {"qwen3": "Qwen3", "qwen3_moe": "Qwen3Moe"}[family]
    torch.manual_seed(0)
    t = getattr(hf, f"{name}Model")(getattr(cfg, f"{name}Config")(**SIZES, **extra)).eval()
    p = getattr(pd, f"{name}Model")(getattr(pd_cfg, f"{name}Config")(**SIZES, **extra, fuse_rms_norm=False))
    p.eval()
    return t, p


def test_qwen3_converts_with_no_map_its_layouts_settled_by_a_run_and_a_swapped_k_v_is_red_at_k_proj():
    from portcheck import compare_forward, convert
    from portcheck.mapping.recipes import paddleformers
    t, p = _pair("qwen3")
    # --- docs: no map
    state = convert(t, p, inputs=IDS)  # no name_map, no layouts
    print(state.said)  # each fused layout, which modules, and the run that settled it
    report = compare_forward(t, p, IDS, layouts=state.fused_found, isolate=True)  # each part judged
    # --- end
    assert report.passed, report.first_diverging
    recipe = paddleformers(num_attention_heads=4, num_key_value_heads=2)
    assert state.fused_found == {f"layers.{i}.{m}": recipe[m.rpartition(".")[2]] for i in (0, 1)
                                 for m in ("self_attn.qkv_proj", "mlp.up_gate_proj")}, state.fused_found
    assert "[q_proj x2 | k_proj | v_proj] per 2 groups, settled by a run: layers.0.self_attn" in state.said, state.said
    layouts = state.fused_found
    report = compare_forward(t, p, IDS, layouts=layouts)
    assert report.passed, report.first_diverging
    # the plant: a converter writing layer 0's groups [q | v | k]
    w = p.layers[0].self_attn.qkv_proj.weight
    groups = w.numpy().reshape(64, 2, 4, 16)[:, :, [0, 1, 3, 2], :].reshape(64, 128)
    w.set_value(groups)
    report = compare_forward(t, p, IDS, layouts=layouts)
    assert not report.passed and report.first_diverging == "layers.0.self_attn.k_proj", report.first_diverging


def test_glm4_moe_router_placed_by_its_shape_green_with_no_map_and_its_experts_reordered_red_at_the_router():
    from portcheck import compare_forward, convert
    from tools.zoo import formers
    t, p, x = formers.build("glm4_moe")
    state = convert(t, p, inputs=x)
    assert "torch layers.1.mlp.gate.weight [4, 64] -> Paddle layers.1.mlp.gate.weight: held by its Glm4MoeTopkRouter " \
           "itself, as it is, the one layout Paddle's shape takes" in state.said, state.said
    report = compare_forward(t, p, x, layouts=state.fused_found)
    assert report.passed, report.first_diverging
    w = p.layers[1].mlp.gate.weight
    w.set_value(np.roll(w.numpy(), 1, axis=0))  # the router's rows one expert off
    report = compare_forward(t, p, x, layouts=state.fused_found)
    assert not report.passed and report.first_diverging.startswith("layers.1.mlp"), report.first_diverging


def test_glm4_moe_own_3d_experts_take_the_one_layout_their_shapes_allow_and_two_experts_swapped_are_red():
    """paddleformers' fd_fallback experts (MoeExperts: gate_up_proj [E, H, 2I], down_proj [E, I, H]) against
    transformers 5's packed [E, 2I, H] and [E, H, I]: their last two axes swapped, the square gate_up_proj
    ([4, 64, 64] here) by the down_proj beside it; green, and two experts' down_proj swapped red at the experts."""
    from portcheck import compare_forward, convert
    from tools.zoo import formers
    formers.OWN["glm4_moe"], own = dict(formers.OWN["glm4_moe"], fd_fallback=True), formers.OWN["glm4_moe"]
    try:
        t, p, x = formers.build("glm4_moe")
    finally:
        formers.OWN["glm4_moe"] = own
    state = convert(t, p, inputs=x)
    assert "torch layers.1.mlp.experts.gate_up_proj [4, 64, 64] -> Paddle layers.1.mlp.experts.gate_up_proj: held by " \
           "its Glm4MoeNaiveMoe itself, its last two axes swapped" in state.said, state.said
    assert compare_forward(t, p, x, layouts=state.fused_found).passed
    w = p.layers[1].mlp.experts.down_proj
    w.set_value(w.numpy()[[1, 0, 2, 3]])
    report = compare_forward(t, p, x, layouts=state.fused_found)
    assert not report.passed and report.first_diverging == "layers.1.mlp.experts", report.first_diverging


def test_qwen3_moe_packed_experts_pair_by_index_green_with_an_eager_yardstick_and_two_experts_swapped_red():
    from portcheck import compare_forward, convert
    from portcheck.mapping.fused import Fused
    t, p = _pair("qwen3_moe", moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True)
    layouts = {"qkv_proj": Fused(("q_proj", "k_proj", "v_proj"), heads=2, widths=(2, 1, 1))}
    convert(t, p, inputs=IDS, layouts=layouts)
    report = compare_forward(t, p, IDS, layouts=layouts)
    assert report.passed, (report.first_diverging, [r.line() for r in report.routing])
    assert any("eager loop" in line for line in report.outputs_said), report.outputs_said
    assert any("probabilities" in r.by_design for r in report.rows if r.key == "layers.0.mlp.gate[0]")
    experts = p.layers[0].mlp.experts
    a, b = experts[0].down_proj.weight, experts[1].down_proj.weight
    first = a.numpy().copy()
    a.set_value(b.numpy())
    b.set_value(first)
    report = compare_forward(t, p, IDS, layouts=layouts)
    assert not report.passed and report.first_diverging == "layers.0.mlp", report.first_diverging


def test_qwen3_moe_compare_backward_is_green_with_no_map_and_its_router_one_expert_off_is_red_at_the_router():
    import paddle
    from portcheck import compare_backward, convert
    t, p = _pair("qwen3_moe", moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True)
    state = convert(t, p, inputs=IDS)
    start = {k: v.numpy().copy() for k, v in p.state_dict().items()}
    target = np.random.RandomState(1).randn(2, 8, 64).astype("float32")
    loss = (lambda o, y: ((o[0] - y) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.01), lambda ps: paddle.optimizer.SGD(0.01, parameters=ps))

    def backward():
        t.load_state_dict(torch_start)
        return compare_backward(t.train(), p.train(), IDS, target, loss=loss, optimizer=sgd, steps=2,
                                layouts=state.fused_found)
    torch_start = {k: v.detach().clone() for k, v in t.state_dict().items()}
    report = backward()
    assert report.passed, report.table()
    # each step's routing read, torch's probabilities and paddleformers' logits as one form: no token at a tie
    read = report.forward.routing + report.routing[1]
    assert len(read) == 4 and not any(r.tied or r.said for r in read), [r.line() for r in read]
    assert any("probabilities" in r.by_design for r in report.forward.rows if r.key == "layers.0.mlp.gate[0]")
    p.set_state_dict(start)
    w = p.layers[0].mlp.gate.weight  # [hidden, experts]: its columns one expert off
    w.set_value(np.roll(w.numpy(), 1, axis=1))
    report = backward()
    assert not report.passed and report.forward.first_diverging.startswith("layers.0.mlp.gate"), \
        report.forward.first_diverging

