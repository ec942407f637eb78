"""A mixture of experts, converted and compared with no map: its experts paired by their index and its router by
structure (mapping.lists), never by the routing before the weights are the same; forward (cumulative and isolated)
and backward green on a correct port; the routing compared as data (forward.routing): each token's experts on both
sides, a tie of the router's logits said as a tie, never red; plants red at their module. Two pairs: transformers'
Mixtral against paddlenlp's (its one line that raises on Paddle 3 written as Paddle 3 needs it), and a small MoE
written as a user would, named otherwise on each side."""
import types

import numpy as np
import pytest

import portcheck.core.runtime  # noqa: F401 (first: threads, quiet notices)
from portcheck import compare_backward, compare_forward, convert

H, F, N, K = 8, 16, 4, 2  # hidden, expert width, experts, experts per token


RATE = 0.05  # a balancing bias's step (DeepSeek-V3's auxiliary-loss-free balancing): moves the choice, not weights


def torch_moe(balance=False):
    """balance: the router's choice reads softmax + a bias each training forward moves against the experts' load
    (the most loaded down), as DeepSeek-V3's auxiliary-loss-free balancing does; the weights are the softmax's."""
    import torch
    from torch import nn

    class Expert(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc_in, self.act, self.fc_out = nn.Linear(H, F), nn.GELU(), nn.Linear(F, H)

        def forward(self, x):
            return self.fc_out(self.act(self.fc_in(x)))

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(H, N)
            self.experts = nn.ModuleList([Expert() for _ in range(N)])
            if balance:
                self.register_buffer("balance", torch.zeros(N))

        def forward(self, x):
            flat = x.reshape(-1, H)
            logits = self.router(flat)
            weights, chosen = torch.softmax(logits, -1).topk(K, -1)
            if balance:
                chosen = (torch.softmax(logits, -1) + self.balance).topk(K, -1)[1]
                weights = torch.softmax(logits, -1).gather(1, chosen)
                if self.training:
                    with torch.no_grad():
                        load = torch.bincount(chosen.reshape(-1), minlength=N).float()
                        self.balance -= RATE * torch.sign(load - load.mean())
            weights = weights / weights.sum(-1, keepdim=True)
            out = torch.zeros_like(flat)
            for e, expert in enumerate(self.experts):
                rows, slot = torch.nonzero(chosen == e, as_tuple=True)
                out = out.index_add(0, rows, expert(flat[rows]) * weights[rows, slot, None])
            return out.reshape(x.shape)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.moe, self.head = nn.LayerNorm(H), MoE(), nn.Linear(H, 3)

        def forward(self, x):
            return self.head(x + self.moe(self.norm(x)))
    torch.manual_seed(0)
    return Net().eval()


def paddle_moe(route="softmax", reverse_ties=False, balance=0):
    """The port, named otherwise. route="logits": top-k of the raw logits, weighted by them (no softmax);
    reverse_ties: a tie goes to the higher index (torch's topk breaks it either way; its block's `reverse` after it is
    built); balance: torch_moe's balancing bias, each step moved by -balance * RATE * sign(load - mean) (1 as
    torch's; -1 a sign flipped)."""
    import paddle
    from paddle import nn
    import paddle.nn.functional as Fn

    class FFN(nn.Layer):
        def __init__(self):
            super().__init__()
            self.linear1, self.gelu, self.linear2 = nn.Linear(H, F), nn.GELU(), nn.Linear(F, H)

        def forward(self, x):
            return self.linear2(self.gelu(self.linear1(x)))

    class SparseMoE(nn.Layer):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(H, N)
            self.expert_list = nn.LayerList([FFN() for _ in range(N)])
            self.reverse = reverse_ties
            if balance:
                self.register_buffer("balance", paddle.zeros([N]))

        def forward(self, x):
            flat = x.reshape([-1, H])
            logits = self.gate(flat)
            scores = Fn.softmax(logits, -1) if route == "softmax" else logits
            if self.reverse:
                chosen = N - 1 - paddle.argsort(scores.flip([-1]), -1, descending=True, stable=True)[:, :K]
                weights = paddle.take_along_axis(scores, chosen, -1)
            elif balance:
                chosen = paddle.topk(scores + self.balance, K, -1)[1]
                weights = paddle.take_along_axis(scores, chosen, -1)
                if self.training:
                    with paddle.no_grad():
                        load = paddle.bincount(chosen.reshape([-1]), minlength=N).astype("float32")
                        self.balance.set_value(self.balance - balance * RATE * paddle.sign(load - load.mean()))
            else:
                weights, chosen = paddle.topk(scores, K, -1)
            weights = weights / weights.sum(-1, keepdim=True)
            out = paddle.zeros_like(flat)
            for e in range(N):
                hit = paddle.nonzero(chosen == e)
                if hit.shape[0] == 0:
                    continue
                rows, slot = hit[:, 0], hit[:, 1]
                y = self.expert_list[e](paddle.gather(flat, rows)) * weights[rows, slot].unsqueeze(-1)
                out = out.index_add(rows, 0, y)
            return out.reshape(x.shape)

    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self.ln, self.moe_block, self.classifier = nn.LayerNorm(H), SparseMoE(), nn.Linear(H, 3)

        def forward(self, x):
            return self.classifier(x + self.moe_block(self.ln(x)))
    paddle.seed(1)
    net = Net()
    net.eval()
    return net


X = np.random.RandomState(0).randn(2, 6, H).astype("float32")


def sgd():
    import paddle
    import torch
    return (lambda ps: torch.optim.SGD(ps, lr=0.05), lambda ps: paddle.optimizer.SGD(0.05, parameters=ps))


MSE = (lambda o, y: ((o - y) ** 2).mean(),) * 2


@pytest.fixture(scope="module")
def handmade():
    """The hand-written pair, converted with no map: before, its run routes tokens otherwise on each side."""
    from portcheck.forward import routing
    from portcheck.mapping import pairing
    from portcheck.mapping.trace import trace
    pt, pd = torch_moe(), paddle_moe()
    records = trace(pt, X), trace(pd, X)
    (before,) = routing.compare(*records, pairing.pair(*records, weights_only=True))
    assert sum(a != b for a, b in zip(*before.chosen)) >= 6  # most tokens: the pairing cannot lean on the routing
    state = convert(pt, pd, inputs=X)
    return pt, pd, {k: np.array(v) for k, v in state.items()}


def test_a_hand_written_moe_named_otherwise_pairs_each_expert_by_its_index_and_is_green(handmade):
    """A user's MoE (router, experts, expert_list, fc_in against linear1): the experts' lists correspond (as many
    children of one structure), so expert i is expert i; forward (cumulative, isolated), routing and 3 steps of
    backward green."""
    import paddle
    pt, pd, state = handmade
    report = compare_forward(pt, pd, X, isolate=True)
    assert report.passed, report.table()
    pairs = report.pairing.pairs
    assert pairs["moe.router"] == "moe_block.gate"
    assert all(pairs[f"moe.experts.{i}.fc_in"] == f"moe_block.expert_list.{i}.linear1" for i in range(N))
    (routed,) = report.routing
    assert not routed.red and not routed.flipped and len(routed.chosen[0]) == 12
    assert "each of 12 tokens reached the same experts of 4" in report.table()
    target = np.random.RandomState(3).randn(2, 6, 3).astype("float32")
    try:
        back = compare_backward(pt.train(), pd.train(), X, target, MSE, sgd(), steps=3)
    finally:  # the steps changed both: the fixture's pair as converted for the tests after
        pt.load_state_dict(torch_moe().state_dict())
        pd.set_state_dict({k: paddle.to_tensor(v) for k, v in state.items()})
        pt.eval()
        pd.eval()
    assert back.passed, back.table()


def test_a_tie_of_the_router_is_said_as_one_and_never_red():
    """Two experts' router rows made equal: every token choosing between them is a tie. Broken alike on both sides:
    green, the ties said; broken otherwise (the port's tie goes to the higher index): not red, what follows the
    block not judged, named at the router."""
    import torch
    pt = torch_moe()
    with torch.no_grad():
        pt.moe.router.weight[2] = pt.moe.router.weight[1]
        pt.moe.router.bias[2] = pt.moe.router.bias[1]
    pd = paddle_moe()
    convert(pt, pd, inputs=X)
    alike = compare_forward(pt, pd, X)
    assert alike.passed, alike.table()
    assert alike.routing[0].tied > 0 and "token(s) at a tie" in alike.table()
    pd = paddle_moe(reverse_ties=True)
    convert(pt, pd, inputs=X)
    other = compare_forward(pt, pd, X, isolate=True)
    (routed,) = other.routing
    assert routed.flipped and not routed.red and not routed.differing
    assert not other.passed and other.first_diverging is None and not other.differing
    assert all(r.passed or not r.judged for r in other.rows + other.isolated)
    assert "tie of the router's logits broken otherwise" in other.table() and "moe.router" in other.table()
    assert other.tied_only and other.view()["headline"].startswith("not judged: routing at moe.router")


def test_a_router_weight_that_sends_tokens_elsewhere_is_red_at_the_router_never_a_tie(handmade):
    """The port's router reads two experts' columns the other way round: its logits differ by more than any tie's
    slack could forgive, so the tokens it sends to other experts are red (PC430), and the first module named is the
    router."""
    import paddle
    pt, pd, state = handmade
    gate = pd.moe_block.gate.weight
    try:
        gate.set_value(gate.numpy()[:, [3, 1, 2, 0]])
        report = compare_forward(pt, pd, X)
    finally:
        pd.set_state_dict({k: paddle.to_tensor(v) for k, v in state.items()})
    (routed,) = report.routing
    assert routed.red and not routed.flipped, report.table()
    assert str(report.first_diverging) == "moe.router" and "[PC430]" in report.table()


def _trained(pt, pd, steps=2, isolate=False, optimizer=None):
    target = np.random.RandomState(3).randn(2, 6, 3).astype("float32")
    return compare_backward(pt.train(), pd.train(), X, target, MSE, optimizer or sgd(), steps=steps, isolate=isolate)


@pytest.mark.parametrize("sign", [1, -1], ids=["as torch's", "its sign flipped"])
def test_routing_in_every_steps_forward_is_compared_and_other_experts_are_red_at_the_router(sign):
    """A balancing bias moved each training forward: its first forward routes alike, the later ones by the bias. As
    torch moves it: every step's routing the same, green. Its sign flipped: from step 2's forward the port sends
    tokens to other experts, red at the router there (PC430). Before, compare_backward read the first forward's
    routing alone: the flipped sign was red at the bias and the losses, never said at the router."""
    pt, pd = torch_moe(balance=True), paddle_moe(balance=sign)
    convert(pt, pd, inputs=X)
    report = _trained(pt, pd)
    said = report.table()
    assert sorted(report.routing) == [1] and len(report.routing[1]) == 1, said
    if sign == 1:
        assert report.passed, said
        assert "routing at moe.router (Paddle: moe_block.gate) in step 2's forward: each of 12 tokens reached the " \
            "same experts" in said
        return
    assert not report.passed and report.routing[1][0].red, said
    assert "routing at moe.router (Paddle: moe_block.gate) in step 2's forward: RED" in said and "[PC430]" in said
    assert report.steps[1][0].name == "routing at moe.router" and not report.steps[1][0].passed


@pytest.mark.parametrize("isolate", [False, True], ids=["plain", "isolated"])
def test_a_tie_broken_otherwise_in_a_later_steps_forward_is_said_as_one_never_red(isolate):
    """Two experts' router rows equal and the router frozen, so their tie stays: both sides break it alike in the first
    forward, the port the other way once its optimizer has stepped. Step 2's forward is a tie broken otherwise (PC431): what
    it reaches is not judged, never red (isolated: that step alone); the first forward and step 1 are green."""
    import torch
    pt = torch_moe()
    with torch.no_grad():
        pt.moe.router.weight[2] = pt.moe.router.weight[1]
        pt.moe.router.bias[2] = pt.moe.router.bias[1]
    pt.moe.router.requires_grad_(False)
    pd = paddle_moe()
    convert(pt, pd, inputs=X)
    for p in pd.moe_block.gate.parameters():
        p.stop_gradient = True

    def flipping(parameters):  # the port's SGD; after its first step, its block breaks ties the other way
        import paddle
        opt = paddle.optimizer.SGD(0.05, parameters=parameters)
        step = opt.step
        opt.step = lambda: (step(), setattr(pd.moe_block, "reverse", True))
        return opt
    report = _trained(pt, pd, isolate=isolate, optimizer=(sgd()[0], flipping))
    said = report.table()
    assert not report.passed and report.forward.passed and all(g.passed for g in report.grads), said
    assert report.routing[1][0].flipped and not report.routing[1][0].red, said
    assert "routing at moe.router (Paddle: moe_block.gate) in step 2's forward" in said and "[PC431]" in said, said
    rows = [r for rows in report.steps for r in rows]
    assert all(r.passed or not r.judged for r in rows) and report.first_diverging is None, said
    assert all(r.passed for r in report.steps[0]), said
    assert not all(r.passed for r in report.steps[1])
    # every value step 2's forward reaches is not judged, within its rule or not: the rule there may hold torch's own
    # run against itself breaking the tie otherwise (on some CPUs it does), no measure of rounding
    assert all(not r.judged for r in report.steps[1] if r.name != "lr"), said
    assert report.view()["headline"].startswith("not judged: routing at moe.router"), report.view()["headline"]


# ------------------------------------------------------------------ transformers' Mixtral against paddlenlp's

def mixtral():
    """(torch model, Paddle model, inputs): one layer, 4 experts, 2 per token."""
    import paddle
    import torch
    from paddlenlp.transformers import MixtralConfig as PdConfig, MixtralModel as PdModel
    from transformers import MixtralConfig, MixtralModel
    tiny = dict(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=32,
                use_cache=False)
    torch.manual_seed(0)
    config = MixtralConfig(**tiny)
    config._attn_implementation = "eager"
    pt = MixtralModel(config).eval()
    paddle.seed(0)
    pd = PdModel(PdConfig(**tiny))
    pd.eval()
    return pt, pd, {"input_ids": np.random.RandomState(0).randint(3, 50, (2, 6)).astype("int64")}


def routed(self, hidden_states, softmax=True, order=None):
    """paddlenlp 2.8.1's MixtralSparseMoeBlock.forward as Paddle 3 needs it: paddle.where gives 1-D indices there,
    so the routing weights are [n] and take an axis (unsqueeze) before they scale an expert's [n, hidden] rows (the
    library's own raises). softmax=False: top-k of the raw logits (a plant); order: the experts run in that order."""
    import paddle
    import paddle.nn.functional as Fn
    b, s, h = hidden_states.shape
    hidden_states = hidden_states.reshape([-1, h])
    router_logits = self.gate(hidden_states)
    scores = Fn.softmax(router_logits.astype("float32"), axis=1) if softmax else router_logits
    weights, chosen = paddle.topk(scores, self.top_k, axis=-1)
    weights /= weights.sum(axis=-1, keepdim=True)
    out = paddle.zeros([b * s, h], dtype=hidden_states.dtype)
    mask = Fn.one_hot(chosen, num_classes=self.num_experts).transpose([2, 1, 0])
    for e in range(self.num_experts):
        idx, top_x = paddle.where(mask[e])
        if top_x.shape[0] == 0:
            continue
        expert = self.experts[order[e] if order else e]
        out.index_add_(top_x, 0, expert(paddle.gather(hidden_states, top_x)) * weights[top_x, idx].unsqueeze(-1))
    return out.reshape([b, s, h]), router_logits


def moe_blocks(pd):
    return [m for _, m in pd.named_sublayers() if type(m).__name__ == "MixtralSparseMoeBlock"]


@pytest.fixture(scope="module")
def mixtral_pair():
    pt, pd, x = mixtral()
    for block in moe_blocks(pd):
        block.forward = types.MethodType(routed, block)
    state = convert(pt, pd, inputs=x)
    return pt, pd, x, state, {k: v.numpy().copy() for k, v in pd.state_dict().items()}


def test_mixtral_converts_with_no_map_each_expert_by_its_index_and_is_green_forward_and_backward(mixtral_pair):
    """transformers' Mixtral against paddlenlp's: before the weights are the same each side routes tokens to other
    experts, yet convert(inputs=) pairs each expert and its w1, w2, w3 by index (the state's origin), and
    forward (cumulative and isolated), the routing, and 3 steps of backward are green."""
    import paddle
    pt, pd, x, state, before = mixtral_pair
    experts = {k: o for k, o in state.origin.items() if ".experts." in k}
    assert len(experts) == 4 * 3 and all(k.rpartition(".")[0] == o.rpartition(".")[0] for k, o in experts.items())
    report = compare_forward(pt, pd, x, isolate=True)
    assert report.passed, report.table()
    assert len(report.routing) == 1 and not report.routing[0].red and not report.routing[0].flipped
    start = {k: v.clone() for k, v in pt.state_dict().items()}
    target = np.random.RandomState(1).randn(2, 6, 16).astype("float32")
    loss = (lambda o, y: ((o.last_hidden_state - y) ** 2).mean(), lambda o, y: ((o[0] - y) ** 2).mean())
    try:
        back = compare_backward(pt.train(), pd.train(), x, target, loss, sgd(), steps=3)
    finally:  # the steps changed both: the fixture's pair as converted for the plants
        pt.load_state_dict(start)
        pd.set_state_dict({k: paddle.to_tensor(v) for k, v in before.items()})
        pt.eval()
        pd.eval()
    assert back.passed, back.table()


def _planted(mixtral_pair, edit):
    """compare_forward on the converted Mixtral with one edit of the Paddle side, then put back."""
    import paddle
    pt, pd, x, _, before = mixtral_pair
    (block,) = moe_blocks(pd)
    try:
        edit(pd, block)
        return compare_forward(pt, pd, x, isolate=True)
    finally:
        block.forward = types.MethodType(routed, block)
        pd.set_state_dict({k: paddle.to_tensor(v) for k, v in before.items()})


def _scaled(name):
    def edit(pd, block):
        w = dict(pd.named_parameters())[name]
        w.set_value(w.numpy() * 1.01)
    return edit


@pytest.mark.parametrize("plant, where", [
    (_scaled("layers.0.block_sparse_moe.experts.2.w1.weight"), "layers.0.block_sparse_moe.experts.2.w1"),
    (_scaled("layers.0.block_sparse_moe.gate.weight"), "layers.0.block_sparse_moe.gate"),
    (lambda pd, block: setattr(block, "forward", types.MethodType(
        lambda self, h: routed(self, h, softmax=False), block)), "layers.0.block_sparse_moe"),
], ids=["an expert's weight", "the router's weight", "top-k of the logits, no softmax"])
def test_a_plant_in_mixtrals_moe_is_red_at_its_module(mixtral_pair, plant, where):
    report = _planted(mixtral_pair, plant)
    assert not report.passed
    assert report.first_diverging.partition("[")[0] == where, report.table()
    assert not any(r.flipped for r in report.routing)


def test_experts_run_in_another_order_is_a_routing_red_named_at_the_router(mixtral_pair):
    """The port's block runs expert 3's weights for tokens routed to expert 0 and the other way round: the tokens
    reach other experts than torch's, said at the router, red."""
    report = _planted(mixtral_pair, lambda pd, block: setattr(block, "forward", types.MethodType(
        lambda self, h: routed(self, h, order=[3, 1, 2, 0]), block)))
    assert not report.passed
    (routed_,) = report.routing
    assert routed_.red and routed_.differing
    assert "routing at layers.0.block_sparse_moe.gate: RED" in report.table()


def test_paddlenlps_own_mixtral_raises_on_paddle_3_and_is_said_so(mixtral_pair):
    """A finding about the port: paddlenlp 2.8.1's MixtralSparseMoeBlock scales [n, hidden] rows by [n] weights on
    Paddle 3 (paddle.where's indices are 1-D there). convert still pairs it by index (its run stopped in the first
    expert), and compare_forward says the Paddle model stopped. Red until paddlenlp changes that line."""
    _, pd, x = mixtral()
    with pytest.raises(ValueError, match="Broadcast dimension mismatch"):
        import paddle
        pd(paddle.to_tensor(x["input_ids"]))
    pt, _, _, state, _ = mixtral_pair
    assert convert(pt, pd, inputs=x).origin == state.origin  # each Paddle tensor filled from the same torch one


def test_gpt2s_blocks_pair_by_index_with_no_run():
    """The rule is no MoE's alone: GPT-2's h.N against paddlenlp's decoder.layers.N, lists of like blocks, pair by
    index, so its conversion with its recipe's layouts needs neither a run nor a map (a tie of c_proj against
    q_proj, k_proj, v_proj and out_proj refused it before), and the port is green."""
    import paddle
    import torch
    from tools.zoo.checks import models
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd, x, layouts = models.MODELS["gpt2 fused"]({})
    pd.set_state_dict(convert(pt, pd, layouts=layouts))
    report = compare_forward(pt.eval(), pd.eval(), x, layouts=layouts)
    assert report.passed, report.table()
    assert report.pairing.pairs["h.1.attn.c_proj"] == "decoder.layers.1.self_attn.out_proj"


def stacked():
    """Two MoE blocks in a stack, named otherwise from the root down on each side (model.layers.N.experts against
    net.layers.N.expert_list, as a causal LM's model. against its port's mixtral.): the layers' weights apart."""
    import paddle
    import torch
    blocks = [torch_moe().moe, torch_moe().moe]
    with torch.no_grad():
        for p in blocks[1].parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = torch.nn.Module()
            self.model.layers = torch.nn.ModuleList(blocks)

        def forward(self, x):
            for layer in self.model.layers:
                x = x + layer(x)
            return x

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.net = paddle.nn.Layer()
            self.net.layers = paddle.nn.LayerList([paddle_moe().moe_block, paddle_moe().moe_block])

        def forward(self, x):
            for layer in self.net.layers:
                x = x + layer(x)
            return x
    pt, pd = Torch().eval(), Port()
    pd.eval()
    convert(pt, pd, inputs=X)
    return pt, pd


def least_likely(self, x):
    """The port's block sending each token to its K least likely experts: the router's logits the same."""
    import paddle
    import paddle.nn.functional as Fn
    flat = x.reshape([-1, H])
    weights, chosen = paddle.topk(Fn.softmax(self.gate(flat), -1), K, -1, largest=False)
    weights = weights / weights.sum(-1, keepdim=True)
    out = paddle.zeros_like(flat)
    for e in range(N):
        hit = paddle.nonzero(chosen == e)
        if hit.shape[0]:
            rows, slot = hit[:, 0], hit[:, 1]
            y = self.expert_list[e](paddle.gather(flat, rows)) * weights[rows, slot].unsqueeze(-1)
            out = out.index_add(rows, 0, y)
    return out.reshape(x.shape)


def test_each_blocks_routing_is_read_where_several_blocks_are_named_otherwise_and_other_experts_name_the_block():
    """Before: the two blocks' expert lists did not correspond (two of one structure, their names apart), so no
    routing was read (report.routing empty) and a block routing tokens to other experts was named at an expert
    fed other rows (net.layers.1.expert_list.0.linear1)."""
    pt, pd = stacked()
    clean = compare_forward(pt, pd, X)
    assert clean.passed and len(clean.routing) == 2 and not any(r.red for r in clean.routing), clean.table()
    pd.net.layers[1].forward = types.MethodType(least_likely, pd.net.layers[1])
    report = compare_forward(pt, pd, X)
    assert [r.red for r in sorted(report.routing, key=lambda r: r.block)] == [False, True], report.table()
    assert report.first_diverging == "model.layers.1", report.table()


def test_a_top_k_routers_weights_are_judged_by_torchs_float64_routing_and_a_renormalisation_is_red_at_it():
    """A port's router returning its top k (routing._choices): the experts it chose and their weights against those
    torch's block handed its experts, expert by expert in either order; the weights held to torch's own error there,
    its float64 run's weights. The same experts, renormalised on one side only: red at the router (PC942)."""
    from portcheck.forward import routing
    index = np.array([[0, 2], [3, 1], [1, 0]])
    raw = np.array([[0.5, 0.3], [0.4, 0.2], [0.35, 0.25]])  # two experts' softmax scores of four, not renormalised
    weights = (raw / raw.sum(-1, keepdims=True)).astype(np.float32)
    twin = index, (raw / raw.sum(-1, keepdims=True)) * (1 + 1e-8)  # its float64 run: torch's own error about 1e-8
    paddle = index[:, ::-1], weights[:, ::-1] + np.float32(3e-8)  # the same weights, the top k in the other order

    def judged(theirs, twin=twin):
        return routing._choices(routing.Routing("mlp", "mlp", "mlp.gate", 4), (theirs, index, weights), twin)
    same = judged(paddle)
    assert not same.red and 0 < same.weights_row.err32 < 1e-7 and \
        same.line().startswith("routing at mlp.gate: each of 3 tokens reached the same experts of 4, their router "
                               f"weights within {same.weight_diff:.3g} (allowed "), same.line()
    renormalised_once = judged((paddle[0], raw[:, ::-1].astype(np.float32)))
    assert renormalised_once.red and not renormalised_once.differing and "[PC942]" in renormalised_once.line() and \
        f"max diff {renormalised_once.weights_row.max:.3g} > allowed" in renormalised_once.line(), \
        renormalised_once.line()
    unmeasured = judged(paddle, twin=None)  # no float64 run of the routing: its experts compared, its weights not judged
    assert unmeasured.weights_row is None and not unmeasured.red and "allowed" not in unmeasured.line()
    other = judged((np.array([[0, 3], [3, 1], [1, 0]]), paddle[1]))
    assert other.red and other.differing == [0] and "[PC941]" in other.line(), other.line()
