"""compare_forward's cost without a verdict changed: the axis-order rule (loose.in_axis_order) settled on a few
values where they settle it, its answer the whole values' rule's on every planted case."""
import itertools

import numpy as np
import pytest

from portcheck.core.errors import PipelineError
from portcheck.forward import judging
from portcheck.mapping import loose


def whole_rule(value, own):
    """in_axis_order as it reads every value in every order: the rule the short way must answer alike."""
    value, own = np.asarray(value), np.asarray(own)
    orders = loose.axis_orders(value.shape, own.shape)
    if not orders or value.dtype.kind != "f" or own.dtype.kind != "f":
        return None
    far = lambda p: float(np.max(np.abs(np.transpose(value, p).astype(np.float64) - own))) if value.size else 0.0
    here = far(tuple(range(value.ndim))) if value.shape == own.shape else np.inf
    if here == 0.0:
        return None
    found = sorted((far(p), p) for p in orders)
    if all(found[0][0] * 10 < d for d, _ in [*found[1:], (here, None)]):
        return found[0][1]
    return None


def cases():
    rng = np.random.RandomState(0)
    fmap = rng.randn(4, 8, 16, 16).astype("float32")
    near = lambda x: (x + rng.randn(*x.shape).astype("float32") * 1e-6).astype("float32")
    swapped = np.ascontiguousarray(np.transpose(fmap, (0, 1, 3, 2)))
    relu = np.maximum(fmap, 0)
    relu[..., ::2, ::2] = 0  # every value the short way reads is 0 on both sides: it settles nothing
    nan = fmap.copy()
    nan[1, 2, 3, 4] = np.nan
    seq = rng.randn(2, 16, 16).astype("float32")
    return {"clean square map": (fmap, near(fmap)), "held with its last two axes swapped": (fmap, near(swapped)),
            "swapped, zero where the short way reads": (relu, np.ascontiguousarray(np.transpose(relu, (0, 1, 3, 2)))),
            "a NaN": (nan, near(fmap)), "equal": (fmap, fmap.copy()),
            "[batch, seq, hidden] against [batch, hidden, seq]": (seq, near(np.ascontiguousarray(seq.transpose(0, 2, 1)))),
            "another shape": (rng.randn(2, 5, 16).astype("float32"), rng.randn(2, 16, 5).astype("float32")),
            "a plant: near neither order": (fmap, rng.randn(*fmap.shape).astype("float32")),
            "float16": (fmap.astype("float16"), near(swapped).astype("float16"))}


@pytest.mark.parametrize("name", list(cases()))
def test_the_axis_order_rule_answers_as_on_the_whole_values(name):
    value, own = cases()[name]
    want = whole_rule(value, own)
    assert loose.in_axis_order(value, own) == want
    if value.shape == own.shape and np.isfinite(value).all():  # the max difference a caller hands in
        here = float(np.max(np.abs(value.astype(np.float64) - own)))
        assert loose.in_axis_order(value, own, here) == want
    assert want is not None or name not in ("held with its last two axes swapped",
                                            "swapped, zero where the short way reads")


def test_a_clean_square_map_reads_no_other_order_whole(monkeypatch):
    """Before: every square output of a clean port (a ResNet's feature maps) was copied to float64 and subtracted
    whole in each other order, 8% of compare_forward on the bench's ResNet."""
    rng = np.random.RandomState(2)
    value = rng.randn(4, 8, 32, 32).astype("float32")
    own = (value + rng.randn(*value.shape) * 1e-6).astype("float32")
    sizes = []
    real = loose._largest
    monkeypatch.setattr(loose, "_largest", lambda x, y: sizes.append(x.size) or real(x, y))
    here = float(np.max(np.abs(value.astype(np.float64) - own)))
    assert loose.in_axis_order(value, own, here) is None
    assert sizes and max(sizes) * 8 <= value.size, sizes


@pytest.mark.parametrize("name", ["clean square map", "held with its last two axes swapped", "a NaN", "equal",
                                  "a plant: near neither order"])
def test_a_row_judged_once_is_the_row_judged_after_the_axis_order(name):
    """judge_against measures a same-shape pair once, before the axis order: its figures those of the pair in the
    layout judged (swapped: torch's values against Paddle's turned back)."""
    a, b = cases()[name]
    row = judging.judge_against("m", a, b)
    order = whole_rule(a, b)
    turned = b if order is None else np.transpose(b, np.argsort(order))
    want = judging.calibrated.against("m", a, turned)
    assert repr((row.max, row.mean, row.problems)) == repr((want.max, want.mean, want.problems))
    assert ("another axis order" in row.by_design) is (order is not None)


def test_every_order_of_a_cube_is_told_apart():
    """Three equal axes: five other orders, one of them the layout Paddle holds."""
    cube = np.random.RandomState(1).randn(2, 6, 6, 6).astype("float32")
    for p in itertools.permutations(range(1, 4)):
        order = (0, *p)
        own = np.ascontiguousarray(np.transpose(cube, order))
        assert loose.in_axis_order(cube, own) == whole_rule(cube, own)
        assert whole_rule(cube, own) == (None if order == (0, 1, 2, 3) else order)


def counted(*models):
    """{side: forward calls of its model} from now on, counted by a hook on the model itself."""
    from collections import Counter
    calls = Counter()
    for side, model in zip(("torch", "paddle"), models):
        model.register_forward_pre_hook(lambda *_, side=side: calls.update([side]))
    return calls


def test_handin_forward_runs_each_model_no_more_than_compare_forward_and_hands_in_record_forwards_outputs(tmp_path):
    """Before: Handin.forward ran torch three more times and Paddle once more than compare_forward (record_forward
    for the guide's pair: torch in float32 and float64), 5 and 3 calls on the MLP pair; now its pair is
    compare_forward's own runs' outputs, the arrays record_forward makes, bit for bit."""
    pytest.importorskip("torch")
    pytest.importorskip("paddle")
    import portcheck
    from portcheck.core.fileio import load_npy
    from portcheck.forward.compare import compare_forward, record_forward
    from portcheck.pipeline.handin import model_output
    from examples.mlp_pair import PaddleNet, first_batch, torch_net
    x, _ = first_batch()
    pt, pd = torch_net().eval(), PaddleNet().eval()
    steps = portcheck.Handin(tmp_path / "log_reprod")
    steps.convert(pt, pd, x)
    calls = counted(pt, pd)
    compare_forward(pt, pd, x, isolate=True)
    alone = dict(calls)
    calls.clear()
    assert steps.forward(pt, pd, x, convert=False).passed
    assert dict(calls) == alone, (dict(calls), alone)
    for side, model in (("torch", pt), ("paddle", pd)):
        rec = record_forward(model, x)
        files = [(f"forward_{side}.npy", model_output(rec))] + \
            ([("forward_torch64.npy", model_output(rec, exact=True))] if side == "torch" else [])
        for name, want in files:
            for folder in (steps.sides, steps.top, steps.top / "diagnostics"):
                if (folder / name).is_file():
                    got = load_npy(folder / name)["logits"]
                    assert got.dtype == want.dtype and np.array_equal(got, want), (folder, name)
    with pytest.raises(PipelineError, match=r"^kept=list: give a dict.*\[PC468\]$"):
        compare_forward(pt, pd, x, kept=[])


def test_kept_leaves_torch_out_where_its_float64_run_is_not_record_forwards():
    """A value no Paddle one is judged against, finite in float32 and Inf in float64 (a constant read off the dtype,
    computed and never used): record_forward tries its float64 run again (the whole model, wider defaults) where
    compare_forward's judged one does not, so its float64 output is not handed in from the comparison: the hand-in
    runs record_forward for torch, as before. Without the unused module, torch's side is kept."""
    torch = pytest.importorskip("torch")
    paddle = pytest.importorskip("paddle")
    from portcheck import compare_forward, convert

    class Wild(torch.nn.Module):
        def forward(self, x):
            return x + float(np.float64(2.0) ** (torch.finfo(x.dtype).bits * 16) / 2.0 ** 500)

    class Torch(torch.nn.Module):
        def __init__(self, wild):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 3)
            self.wild = Wild() if wild else None

        def forward(self, x):
            h = self.a(x)
            if self.wild is not None:
                self.wild(h)
            return self.b(h)

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.a, self.b = paddle.nn.Linear(4, 4), paddle.nn.Linear(4, 3)

        def forward(self, x):
            return self.b(self.a(x))
    x = np.random.RandomState(0).randn(2, 4).astype("float32")
    for wild in (False, True):
        torch.manual_seed(0)
        pt, pd = Torch(wild).eval(), Port()
        convert(pt, pd, inputs=x)
        kept = {}
        assert compare_forward(pt, pd, x, kept=kept).passed
        assert sorted(kept) == (["paddle"] if wild else ["paddle", "torch"])
        assert wild or sorted(kept["torch"]) == ["f64:out/(model)", "out/(model)"]
