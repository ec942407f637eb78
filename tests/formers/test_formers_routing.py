"""Plants in the routing of paddleformers' MoE routers of their own (GLM-4-MoE's and DeepSeek-V3's TopkRouter, which
return their top k where transformers' return logits, the choice read with a score bias): on tiny random pairs
converted with no map, the correct port green, its routing read (each token's experts and their weights against those
torch's block hands its packed experts); its score bias left out of the choice red at the router, the tokens and
experts named; its top-k weights' renormalisation flipped (the same experts, other weights) red at the block holding
the router; a router as many experts wide as the hidden size settled by its run."""
import numpy as np
import pytest
import torch

BIAS = [0.3, -0.2, 0.1, -0.4]  # a score bias of its own (transformers' starts at zeros, as a fresh checkpoint's)


@pytest.fixture(scope="module", params=["glm4_moe", "deepseek_v3"])
def converted(request):
    from portcheck import convert
    from tools.zoo import formers
    t, p, x = formers.build(request.param)
    if request.param == "deepseek_v3":  # paddleformers' own routing defaults differ (a finding): given as torch's
        for name in ("routed_scaling_factor", "norm_topk_prob"):
            value = getattr(t.config, name)
            for layer in p.layers[1].mlp.gate, p.layers[1].mlp:
                if hasattr(layer, name):
                    setattr(layer, name, value)
    with torch.no_grad():
        t.layers[1].mlp.gate.e_score_correction_bias.copy_(torch.tensor(BIAS))
    state = convert(t, p, inputs=x)
    return t, p, x, state.fused_found


@pytest.mark.parametrize("plant", [None, "renorm", "bias"])
def test_a_plant_in_the_routing_is_red_at_the_router_or_the_block_where_it_is_made(converted, plant):
    from portcheck import compare_forward
    t, p, x, layouts = converted
    gate = p.layers[1].mlp.gate
    bias = gate.e_score_correction_bias.numpy().copy()
    if plant == "renorm":
        gate.norm_topk_prob = not gate.norm_topk_prob
    if plant == "bias":
        gate.e_score_correction_bias.set_value(np.zeros_like(bias))
    try:
        report = compare_forward(t, p, x, layouts=layouts)
    finally:
        gate.norm_topk_prob = not gate.norm_topk_prob if plant == "renorm" else gate.norm_topk_prob
        gate.e_score_correction_bias.set_value(bias)
    (routed,) = report.routing
    if plant is None:
        assert report.passed, report.first_diverging
        assert routed.line() == ("routing at layers.1.mlp.gate: each of 16 tokens reached the same experts of 4, their "
                                 f"router weights within {routed.weight_diff:.3g}") and routed.weight_diff < 1e-6, \
            routed.line()
    elif plant == "bias":
        assert not report.passed and report.first_diverging == "layers.1.mlp.gate", report.first_diverging
        assert routed.line().startswith("routing at layers.1.mlp.gate: RED: ") and "[PC941]" in routed.line(), \
            routed.line()
        t = routed.differing[0]
        assert f"the first token {t} torch's experts {sorted(routed.chosen[0][t])}, Paddle's " \
               f"{sorted(routed.chosen[1][t])}" in routed.line() and routed.chosen[0][t] != routed.chosen[1][t]
    else:
        assert not report.passed and report.first_diverging == "layers.1.mlp", report.first_diverging
        assert not routed.red and routed.weight_diff > 1e-3, routed.line()


@pytest.mark.parametrize("family, taken", [("glm4_moe", "as it is"), ("deepseek_v3", "transposed")])
def test_a_router_as_many_experts_wide_as_hidden_is_settled_by_its_run(family, taken):
    """64 experts on a hidden of 64: the router's weight is square, which either layout fits. GLM-4-MoE's Paddle
    router holds it [experts, hidden] as transformers' does, DeepSeek-V3's [hidden, experts]: each settled by the run
    on torch's recorded input at the block, said, and green."""
    from portcheck import compare_forward, convert
    from tools.zoo import formers
    formers.OWN[family], own = dict(formers.OWN[family], n_routed_experts=64), formers.OWN[family]
    try:
        t, p, x = formers.build(family)
    finally:
        formers.OWN[family] = own
    if family == "deepseek_v3":
        p.layers[1].mlp.gate.routed_scaling_factor, p.layers[1].mlp.gate.norm_topk_prob = 2.5, True
    state = convert(t, p, inputs=x)
    assert "torch layers.1.mlp.gate's square weight in Paddle layers.1.mlp.gate: run both ways on torch's recorded " \
           f"input (" in state.said and f"from torch's layers.1.mlp, its parent): taken {taken}" in state.said, state.said
    report = compare_forward(t, p, x, layouts=state.fused_found)
    assert report.passed, report.first_diverging
