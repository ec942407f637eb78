"""A tie of a port's router returning its top k (paddleformers' TopkRouter) against torch's block handing its packed
experts their choice (forward.routing): two experts' scores equal, torch's and the port's top k may break the tie each
its own way, and a correct port is then said at a tie (PC431), never red, in one process and from records saved apart;
what follows the block is not judged on that batch. The tie is judged on torch's router's scores: a score bias on one
side, a top k of the wrong sign, or a renormalisation flipped stays red at the router with the tie there; where
torch's block chooses by more than its router's output (a score bias), the tie is said as not judged and the tokens
stay red."""
import numpy as np
import pytest

import portcheck.core.runtime  # noqa: F401 (first: threads, quiet notices)
from portcheck import compare_forward, convert
from portcheck.forward import routing
from portcheck.forward.compare import judge_forward, record_forward
from test_moe_saved import E, K, X, paddle_moe, saved, torch_moe


def tied_torch():
    """torch_moe with experts 1 and 2 given one router row: their scores equal at every token (in float64 too)."""
    import torch
    pt = torch_moe()
    with torch.no_grad():
        pt.mlp.gate.weight[2] = pt.mlp.gate.weight[1]
    return pt


def port(plant=None, high=False):
    """paddle_moe whose router breaks a tie by the expert's index, the lower one or (high) the higher (either is
    correct: neither library promises one). plant: "bias" (a score bias the choice reads, on this side only), "sign"
    (the top k of the wrong sign: the least likely), "renorm" (the top k's weights left as the softmax gave them)."""
    import paddle
    model = paddle_moe(renormalised=plant != "renorm")
    gate, bias = model.mlp.gate, paddle.to_tensor([0.0, 0.0, 0.0, 0.3])

    def forward(x):
        probs = paddle.nn.functional.softmax(x @ gate.weight.T, -1)
        choice = probs + bias if plant == "bias" else probs
        choice = choice[:, ::-1] if high else choice
        index = paddle.argsort(choice, axis=-1, descending=plant != "sign", stable=True)[:, :K]
        index = E - 1 - index if high else index
        weights = paddle.take_along_axis(probs, index, axis=-1)
        return index, weights / weights.sum(-1, keepdim=True) if plant != "renorm" else weights
    gate.forward = forward
    return model


@pytest.fixture(scope="module")
def tied():
    pt = tied_torch()
    ports = {}
    for name, plant, high in (("lower", None, False), ("higher", None, True), ("bias", "bias", False),
                              ("sign", "sign", False), ("renorm", "renorm", False)):
        ports[name] = port(plant, high)
        convert(pt, ports[name], inputs=X)
    return pt, ports


def test_a_tie_broken_otherwise_by_a_top_k_router_is_said_as_one_never_red(tied, tmp_path):
    """Experts 1 and 2 level at every token: the port breaking the tie toward the lower index, or the higher, sends
    some token to the other one of the two than torch's topk (which breaks it its own way). Neither is red: each token
    chosen otherwise is said at a tie of torch's router's scores (PC431), the same line from records saved apart, what
    follows the block not judged, the report not green."""
    pt, ports = tied
    t = saved(tmp_path, "torch", record_forward(pt, X))
    flipped = 0
    for side in ("lower", "higher"):
        here = compare_forward(pt, ports[side], X)
        apart = judge_forward(t, saved(tmp_path, side, record_forward(ports[side], X)))
        for report in here, apart:
            (routed,) = report.routing
            assert routed.topk and routed.scored and not routed.red and not routed.differing, routed.line()
            assert report.first_diverging is None and all(r.passed or not r.judged for r in report.paired), \
                report.table()
            for token in routed.flipped:  # the two level experts, one on each side
                assert routed.chosen[0][token] ^ routed.chosen[1][token] == {1, 2}, routed.line()
        assert here.routing[0].line() == apart.routing[0].line()
        if here.routing[0].flipped:
            assert "[PC431]" in here.routing[0].line() and not here.passed and here.tied_only, here.table()
            assert not any(r.judged for r in here.rows if r.name in ("mlp", "head", "(model)")), here.table()
            assert here.view()["headline"].startswith("not judged: routing at mlp.gate"), here.view()["headline"]
        flipped += len(here.routing[0].flipped)
    assert flipped, "neither tie-break parted from torch's: no tie broken otherwise was judged"


def test_a_near_tie_float32_parts_each_side_its_own_way_is_never_red(tmp_path):
    """Expert 2's router row expert 1's moved along a step orthogonal to token 10: their scores there are level in
    float64 but for the row's float32 rounding (some 1e-8), and each side's float32 run may part them its own way
    (torch's topk picking one, the port's the other, by their kernels' rounding). The port as it is, correct: never
    red, in one process and from records saved apart; a token chosen otherwise is said at a tie (PC431)."""
    import torch
    pt, pd = torch_moe(), paddle_moe()
    rows, token = X.reshape(-1, X.shape[-1]).astype(np.float64), 10
    step = np.random.RandomState(6).randn(X.shape[-1])
    step -= step @ rows[token] / (rows[token] @ rows[token]) * rows[token]
    with torch.no_grad():
        pt.mlp.gate.weight[2] = pt.mlp.gate.weight[1] + torch.from_numpy(0.3 * step).float()
    logits = rows @ pt.mlp.gate.weight.detach().numpy().astype(np.float64).T
    assert abs(logits[token, 1] - logits[token, 2]) < 1e-7 and sorted(np.argsort(-logits[token])[:K]) in ([0, 1],
                                                                                                          [0, 2])
    convert(pt, pd, inputs=X)
    here = compare_forward(pt, pd, X)
    apart = judge_forward(*(saved(tmp_path, side, record_forward(m, X)) for side, m in (("torch", pt), ("paddle", pd))))
    for report in here, apart:
        (routed,) = report.routing
        assert routed.scored and not routed.red and report.first_diverging is None, routed.line()
        assert routed.flipped in ([], [token]) and (report.passed or "[PC431]" in routed.line()), routed.line()
    assert here.routing[0].line() == apart.routing[0].line()


@pytest.mark.parametrize("plant", ["bias", "sign", "renorm"])
def test_a_routing_bug_stays_red_at_the_router_beside_a_tie(tied, tmp_path, plant):
    """The same tied pair, the port's router planted: a score bias on its side alone and the top k of the wrong sign
    send tokens to experts torch's scores are far apart from: red at the router, no tie (PC941); the renormalisation
    flipped, the same experts, red by the weights (PC942). The same from records saved apart."""
    pt, ports = tied
    here = compare_forward(pt, ports[plant], X)
    apart = judge_forward(*(saved(tmp_path, side, record_forward(m, X)) for side, m in (("torch", pt),
                                                                                       ("paddle", ports[plant]))))
    for report in here, apart:
        (routed,) = report.routing
        assert routed.red and not report.passed and str(report.first_diverging) == "mlp.gate", report.table()
        if plant == "renorm":
            assert "[PC942]" in routed.line(), routed.line()
            continue
        t = routed.differing[0]
        assert routed.scored and routed.chosen[0][t] ^ routed.chosen[1][t] != {1, 2}, routed.line()
        assert routed.line().endswith("; no tie of torch's router's scores there [PC941]"), routed.line()
    assert here.routing[0].line() == apart.routing[0].line()


def test_where_torchs_block_chooses_by_more_than_its_router_the_tie_is_said_not_judged_and_red():
    """torch's block choosing with a score bias its router's output does not hold, the port's router leaving it out:
    torch's choice is not the top k of its router's scores, which then say nothing of a tie: the tokens sent elsewhere
    stay red at the router, the line saying the tie was not judged."""
    pt, pd = torch_moe(bias=[0.0, 0.0, 0.0, 0.3]), paddle_moe()
    convert(pt, pd, inputs=X)
    report = compare_forward(pt, pd, X)
    (routed,) = report.routing
    assert routed.red and not routed.scored and not report.passed and str(report.first_diverging) == "mlp.gate"
    assert routed.line().endswith("whether at a tie not judged: torch's block chooses by more than its router's output "
                                  "(a score bias or a group limit the record does not hold) [PC941]"), routed.line()


def test_a_near_tie_is_judged_on_torchs_scores_within_their_own_error_and_ulps():
    """routing._choices on a token whose two experts' scores are one unit of the last place apart (rounding parts
    them): the port choosing the other is at a tie; some millionths apart, red, unless torch's own error at the token
    (its float64 run's scores) is near it, taken the measured rule's multiple; torch's float64 run choosing as the port
    does makes a tie with no scores read; scores torch's own choice is not the top k of are read as none."""
    x = np.float32(-1.2)
    weights = np.array([[0.6, 0.4]], np.float32)

    def judged(gap=None, own=0.0, twin=None, mine=(0, 1), theirs=(0, 2)):
        scores = None
        if gap is not None:
            logits = np.array([[-0.5, x, np.nextafter(x, np.float32(-9)) if gap == "ulp" else x - gap, -3.0]],
                              np.float32)
            record = {"out/mlp.gate": logits, "f64:out/mlp.gate": logits.astype(np.float64) + [[own, 0, 0, 0]]}
            scores = routing._scores(record, "mlp.gate", {})
        r = routing.Routing("mlp", "mlp", "mlp.gate", E)
        return routing._choices(r, ((np.array([theirs]), weights), np.array([mine]), weights), twin, scores)
    for gap, own, tie in (("ulp", 0.0, True), (1e-3, 0.0, False), (3e-6, 0.0, False), (3e-6, 1e-6, True),
                          (1e-3, 1e-6, False)):
        r = judged(gap, own)
        assert r.scored and (r.flipped == [0]) == tie and r.red != tie, (gap, own, r.line())
    assert judged(twin=(np.array([[0, 2]]), weights)).flipped == [0]  # torch's own two runs break it apart
    assert judged(twin=(np.array([[0, 1]]), weights)).differing == [0]
    unread = judged(1e-3, mine=(0, 3), theirs=(0, 1))  # expert 3 is no top 2 of these scores
    assert not unread.scored and unread.differing == [0] and "whether at a tie not judged" in unread.line()


def test_compare_backwards_later_routing_reached_by_a_first_tie_is_said_not_judged():
    """A tie broken otherwise in the first forward: each later step's routing (read, its tokens perhaps sent
    elsewhere by the weights the tie moved) is said as not judged, never printed as a verdict of its own."""
    import copy
    import paddle
    import torch
    from portcheck import compare_backward
    pt, pd = tied_torch(), port()
    convert(pt, pd, inputs=X)
    report = compare_backward(copy.deepcopy(pt).train(), pd.train(), X,
                              np.random.RandomState(3).randn(2, 6, 3).astype("float32"),
                              (lambda o, t: ((o - t) ** 2).mean(),) * 2,
                              (lambda p: torch.optim.SGD(p, lr=0.1), lambda p: paddle.optimizer.SGD(0.1, parameters=p)),
                              steps=3)
    lines = [line for line in report.table().splitlines() if "routing at mlp.gate in step" in line]
    assert report.tied_only and len(lines) == 2, report.table()
    assert all(line.startswith("not judged: reached by the routing tie in step 1's forward: ") for line in lines), lines
