"""Plants in the routing of paddleformers' MoE routers of their own (GLM-4-MoE's and DeepSeek-V3's TopkRouter, which
return their top k where transformers' return logits, the choice read with a score bias): on tiny random pairs
converted with no map, the correct port green, its routing read (each token's experts and their weights against those
torch's block hands its packed experts), in compare_forward and in compare_backward's first forward alike; its score
bias left out of the choice, or its experts one column off, red at the router, the tokens and experts named; its
top-k weights' renormalisation flipped (the same experts, other weights) red at the router too, by the measured rule
(torch's own error there: its float64 run's weights); a router as many experts wide as the hidden size settled by its
run."""
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
    p.set_state_dict(state)
    return t, p, x, state.fused_found


def _planted(p, plant):
    """(the edit, its undo) of a plant in the Paddle router."""
    gate = p.layers[1].mlp.gate
    bias, weight, renorm = gate.e_score_correction_bias.numpy().copy(), gate.weight.numpy().copy(), gate.norm_topk_prob
    edits = {"renorm": lambda: setattr(gate, "norm_topk_prob", not renorm),
             "bias": lambda: gate.e_score_correction_bias.set_value(np.zeros_like(bias)),
             # its experts one column off (the expert axis is the one as long as the bias)
             "order": lambda: gate.weight.set_value(np.roll(weight, 1, axis=list(weight.shape).index(len(bias))))}

    def undo():
        gate.norm_topk_prob = renorm
        gate.e_score_correction_bias.set_value(bias)
        gate.weight.set_value(weight)
    return edits.get(plant, lambda: None), undo


def _backward(t, p, x, layouts, steps=1):
    """compare_backward, SGD steps on a mean squared error of the last hidden states; torch's weights kept."""
    import paddle
    from portcheck import compare_backward
    start = {k: v.detach().clone() for k, v in t.state_dict().items()}
    target = np.random.RandomState(1).randn(*x["input_ids"].shape, 64).astype("float32")
    loss = (lambda o, y: ((o[0] - y) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.01), lambda ps: paddle.optimizer.SGD(0.01, parameters=ps))
    try:
        return compare_backward(t.train(), p.train(), x, target, loss=loss, optimizer=sgd, steps=steps,
                                layouts=layouts)
    finally:
        t.load_state_dict(start)
        t.eval()
        p.eval()


@pytest.mark.parametrize("how, plant", [("forward", None), ("forward", "renorm"), ("forward", "bias"),
                                       ("forward", "order"), ("backward", None), ("backward", "renorm"),
                                       ("backward", "bias")])
def test_a_plant_in_the_routing_is_red_at_the_router(converted, how, plant):
    """compare_backward's first forward reads the routing as compare_forward does, and each later step's forward its
    choice (a plant: one step, its first forward is where the routing parts; experts one column off are read as the
    bias left out is)."""
    from portcheck import compare_forward
    t, p, x, layouts = converted
    before = {k: v.numpy().copy() for k, v in p.state_dict().items()}
    edit, undo = _planted(p, plant)
    edit()
    try:
        if how == "forward":
            report = compare_forward(t, p, x, layouts=layouts)
            whole = report
        else:
            whole = _backward(t, p, x, layouts, steps=1 if plant else 2)
            report = whole.forward
    finally:
        undo()
        p.set_state_dict(before)
    (routed,) = report.routing
    if plant is None:
        assert whole.passed and report.passed, whole.table()
        row = routed.weights_row
        assert routed.line() == ("routing at layers.1.mlp.gate: each of 16 tokens reached the same experts of 4, their "
                                 f"router weights within {routed.weight_diff:.3g} (allowed {row.allowed:.3g}, torch's "
                                 "own error: its float64 run's weights)") and routed.weight_diff < 1e-6, routed.line()
        assert 0 < row.err32 < 1e-6, row.err32  # the float64 run's weights: torch's own error measured, not zero
        if how == "backward":  # the second step's forward read too: its choice and weights against torch's
            (later,) = whole.routing[1]
            assert later.topk and not later.red and later.line(step=1).startswith(
                "routing at layers.1.mlp.gate in step 2's forward: each of 16 tokens reached the same experts"), \
                later.line(step=1)
        return
    assert not whole.passed and report.first_diverging == "layers.1.mlp.gate", report.first_diverging
    assert routed.line().startswith("routing at layers.1.mlp.gate: RED: "), routed.line()
    if plant == "renorm" or not routed.differing:  # the same experts, other weights: judged by the measured rule
        # (experts one column off choose alike where the score bias decides the choice)
        assert plant in ("renorm", "order") and routed.weight_diff > 1e-3 and "[PC942]" in routed.line(), routed.line()
        assert f"max diff {routed.weights_row.max:.3g} > allowed {routed.weights_row.allowed:.3g}" in routed.line()
        return
    t_ = routed.differing[0]
    assert "[PC941]" in routed.line() and f"the first token {t_} torch's experts {sorted(routed.chosen[0][t_])}, " \
           f"Paddle's {sorted(routed.chosen[1][t_])}" in routed.line() and routed.chosen[0][t_] != routed.chosen[1][t_]


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



def test_records_saved_apart_judge_the_routing_as_compare_forward(converted, tmp_path):
    """Each side's record_forward written to a file and read back, as two venvs write them: torch's record keeps the
    choice its block handed its packed experts (its float64 run's too), so judge_forward reads each token's experts
    and judges their weights as compare_forward does: the same line, green; the renormalisation flipped red at the
    router (PC942)."""
    from portcheck import compare_forward
    from portcheck.core.fileio import load_npy, save_npy
    from portcheck.forward.compare import judge_forward, record_forward
    from portcheck.mapping import fused

    def saved(side, model):
        # the fused layouts convert found, said in the record as compare_forward says them (record_forward takes none)
        save_npy(tmp_path / f"{side}.npy", fused.mark(record_forward(model, x), fused.specs(model, layouts), model))
        return load_npy(tmp_path / f"{side}.npy")
    t, p, x, layouts = converted
    torch_record = saved("torch", t)
    for plant in (None, "renorm"):
        edit, undo = _planted(p, plant)
        edit()
        try:
            here, apart = compare_forward(t, p, x, layouts=layouts), judge_forward(torch_record, saved("paddle", p))
        finally:
            undo()
        (routed,) = apart.routing
        assert routed.line() == here.routing[0].line() and routed.weights_row is not None, (routed.line(), plant)
        assert apart.passed == here.passed == (plant is None), apart.table()
        if plant:
            assert str(apart.first_diverging) == "layers.1.mlp.gate" and "[PC942]" in routed.line(), routed.line()
