"""The forms of portcheck.mapping.loose and .regroup judged from two saved records, as a pt_/pd_ script pair and its
check judge them (record_forward on each side, judge_forward; the split form's Handin.judge calls judge_forward on
the whole records): each pair as compare_forward pairs it, a correct port green, each plant red at its module; a
Linear's gradient the port's parent holds bare, a 0-d one against [1], one of axes merged and a bare [out, in] one
against a Linear found and judged from two record_backward records; and records written before they kept their
tensor names say in one line that the rule was not applied."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_forward, convert, judge_forward, record_forward  # noqa: E402
from portcheck.gradients.backward import judge_backward, record_backward  # noqa: E402
from portcheck.mapping import loose  # noqa: E402
from portcheck.mapping.modules import NAMES  # noqa: E402
import test_loose_forms as forms  # noqa: E402
import test_regroup as regroup  # noqa: E402


def lm_head(plant=False, vocab=11):
    """An lm head the port holds in a layer of its own, its weight [vocab, hidden] as OPTLMHead's decoder_weight.
    plant: the port reads it as [hidden, vocab] (a reshape, not the transpose; as x @ W where vocab is hidden)."""
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.lm_head = torch.nn.LayerNorm(16), torch.nn.Linear(16, vocab, bias=False)

        def forward(self, h):
            return self.lm_head(self.norm(h))

    class LMHead(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.decoder_weight = self.create_parameter([vocab, 16])

        def forward(self, h):
            if plant:
                return paddle.matmul(h, self.decoder_weight.reshape([16, vocab]))
            return paddle.matmul(h, self.decoder_weight, transpose_y=True)

    class PortHead(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm, self.lm_head = paddle.nn.LayerNorm(16), LMHead()

        def forward(self, h):
            return self.lm_head(self.norm(h))
    return Head(), PortHead(), (2, 5, vocab)


def renamed_projection(plant=False):
    """CLIP's visual_projection, a Linear with its bias, against a port holding both bare at the root under names of
    its own (paddlenlp's vision_projection; vision_bias): no name says them, the one unclaimed shape of each does.
    plant: the port subtracts the bias."""
    class Clip(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.visual_projection = torch.nn.Linear(8, 16), torch.nn.Linear(16, 6)

        def forward(self, x):
            return self.visual_projection(torch.tanh(self.enc(x)))

    class PortClip(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.enc, self.vision_projection = paddle.nn.Linear(8, 16), self.create_parameter([16, 6])
            self.vision_bias = self.create_parameter([6], is_bias=True)

        def forward(self, x):
            h = paddle.matmul(paddle.tanh(self.enc(x)), self.vision_projection)
            return h - self.vision_bias if plant else h + self.vision_bias
    return Clip(), PortClip(), (2, 5, 6)


BUILDS = {"a pooler's Linear against the port's dense_weight, dense_bias": (forms.pooler, "part"),
          "a block's bare [out, in] and 0-d against a Linear and [1]": (lambda plant: forms.block("out, in", plant),
                                                                         "part"),
          "CLIP's projections crossed at the root, 0-d against [1]": (forms.clip, "(model)"),
          "an lm head held in a layer of the port's own, [vocab, hidden]": (lm_head, "part"),
          "a square lm head the port's own layer holds under another name": (lambda plant: lm_head(plant, vocab=16),
                                                                              "part"),
          "a head-split output (Linear3D)": (lambda plant: regroup.head_split(plant="heads" if plant else False)[:2],
                                             "query"),
          "a parameter with axes merged": (lambda plant: regroup.merged_axes(plant)[:2], "rel"),
          "a Linear against bare parameters of other names (vision_projection)": (renamed_projection, "(model)")}
LAYOUTS = {"a parameter with axes merged": {"Rel": "same"},
           "a square lm head the port's own layer holds under another name": {"LMHead": "same"}}


def built(form, plant=False):
    torch.manual_seed(0)
    paddle.seed(0)
    build, _ = BUILDS[form]
    pt, pd = build(plant=plant)[:2]
    if not form.startswith(("a head-split", "a parameter")):
        pt, pd, _ = forms.models((pt, pd, None))
    pd.set_state_dict(convert(pt, pd, inputs=forms.X, layouts=LAYOUTS.get(form)))
    return pt.eval(), pd.eval()


@pytest.mark.parametrize("form", list(BUILDS))
def test_two_saved_records_pair_each_form_as_compare_forward_does(form):
    """Before: CLIP's projections red at visual_projection on a correct port (the run paired torch's visual_projection
    with the port's text_projection), the pooler's and the block's plants named at (model), not at part (torch's
    part.dense paired with the port's part, whose own output was then judged nowhere)."""
    where = BUILDS[form][1]
    for plant in (False, True):
        pt, pd = built(form, plant)
        saved = judge_forward(record_forward(pt, forms.X), record_forward(pd, forms.X))
        live = compare_forward(pt, pd, forms.X, layouts=LAYOUTS.get(form))
        assert saved.passed == live.passed == (not plant), saved.table()
        assert saved.first_diverging == live.first_diverging, saved.table() + live.table()
        if plant:
            assert saved.first_diverging.startswith(where), saved.table()
        assert loose.UNNAMED not in saved.table()


SAVED_BACKWARD = {"a pooler's Linear against the port's dense_weight, dense_bias": (None, "grad part.dense.weight"),
                  "a block's bare [out, in] and 0-d against a Linear and [1]": ({"Block": "same"},
                                                                                "grad part.out_proj"),
                  "a parameter with axes merged": ({"Rel": "same"}, "grad rel.q"),
                  "an lm head held in a layer of the port's own, [vocab, hidden]": (None, "grad part.lm_head.weight"),
                  "a Linear against bare parameters of other names (vision_projection)":
                      (None, "grad visual_projection.bias")}


@pytest.mark.parametrize("form", list(SAVED_BACKWARD))
def test_each_gradient_held_otherwise_is_judged_from_two_saved_records(form):
    """record_backward on each side (torch's own module holding a 2-D tensor declared, as record_backward alone asks):
    a Linear's gradient the port's parent holds bare found under torch's name, a bare [out, in] one against the
    port's Linear transposed, a 0-d one against [1] and one of axes merged reshaped, an lm head's the port's own layer
    holds as decoder_weight [vocab, hidden] transposed; green, each plant red. Before: "part.dense.weight (no
    counterpart on paddle)", and rel.q's [16, 2, 8] against [16, 16] red on a correct port."""
    layouts, grad = SAVED_BACKWARD[form]
    for plant in (False, True):
        pt, pd = built(form, plant)
        y = np.random.RandomState(1).randn(*pt(torch.from_numpy(forms.X)).shape).astype("float32")
        loss = lambda o, t: ((o - t) ** 2).mean()
        t = record_backward(pt.train(), forms.X, y, loss, lambda ps: torch.optim.SGD(ps, lr=0.1), steps=2,
                            layouts=layouts)
        p = record_backward(pd.train(), forms.X, y, loss, lambda ps: paddle.optimizer.SGD(0.1, parameters=ps),
                            steps=2)
        report = judge_backward(t, p)
        assert report.passed == (not plant), report.table()
        assert grad in {r.name for r in report.grads}, report.table()
        assert plant or all(r.passed for r in report.grads), report.table()


def test_records_keeping_no_tensor_names_say_the_rule_was_not_applied():
    """Records written before own/ keys: the CLIP pair is red as before, and one line says which rule was not
    applied and what to do; never silent."""
    pt, pd = built("CLIP's projections crossed at the root, 0-d against [1]")
    old = lambda record: {k: v for k, v in record.items() if not k.startswith(NAMES)}
    report = judge_forward(old(record_forward(pt, forms.X)), old(record_forward(pd, forms.X)))
    assert not report.passed and loose.UNNAMED in report.table(), report.table()
    assert "[PC486]" in loose.UNNAMED and "compare_forward" in loose.UNNAMED


def test_run_refuses_a_square_head_under_another_name_with_the_layouts_that_pasted_compare_green():
    """A square lm head ([16, 16]) the port's own layer holds as decoder_weight: either layout fits its shape.
    `portcheck run`'s Paddle side (start_from_torch, on torch's record) refuses it with convert's PC455 line, the
    layouts= to declare and where it is taken; pasted as printed, convert and compare_forward are green, and a port
    reading it as x @ W is red at the head. Before: "Paddle part.lm_head.decoder_weight no torch tensor fills"
    [PC831], no layouts= named."""
    import re
    from portcheck.core.errors import PipelineError
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd, _ = forms.models(lm_head(vocab=16))
    with pytest.raises(PipelineError, match=r"square: either layout fits.*portcheck run cannot place it.*"
                                            r"\[PC455\]") as e:
        run_side().start_from_torch(pd, record_forward(pt.eval(), forms.X), forms.X)
    layouts = eval(re.search(r"pass (layouts=\{.*?\})", str(e.value)).group(1)[len("layouts="):])
    assert layouts == {"LMHead": "same"}, str(e.value)
    for plant in (False, True):
        torch.manual_seed(0)
        paddle.seed(0)
        pt, pd, _ = forms.models(lm_head(plant, vocab=16))
        pd.set_state_dict(convert(pt, pd, inputs=forms.X, layouts=layouts))
        report = compare_forward(pt.eval(), pd.eval(), forms.X, layouts=layouts)
        assert report.passed == (not plant) and (not plant or report.first_diverging.startswith("part")), \
            report.table()



def square_records(how, plant=False, declare=True):
    """(torch's record_backward, Paddle's) of the square lm head ([16, 16]) the port's LMHead holds as
    decoder_weight, converted with layouts={'LMHead': how}; the torch record made alone, with that layouts= where
    `declare`. The port reads it as the layout says (how 'same': x @ W.T of torch's [out, in]; 'transpose': x @ W of
    [in, out]); plant: the other way round."""
    torch.manual_seed(0)
    paddle.seed(0)
    layouts = {"LMHead": how}
    pt, pd, _ = forms.models(lm_head(plant=(how == "transpose") != plant, vocab=16))
    pd.set_state_dict(convert(pt, pd, inputs=forms.X, layouts=layouts))
    y = np.random.RandomState(1).randn(2, 5, 16).astype("float32")
    loss = lambda o, t: ((o - t) ** 2).mean()
    return (record_backward(pt.train(), forms.X, y, loss, lambda ps: torch.optim.SGD(ps, lr=0.1), steps=2,
                            layouts=layouts if declare else None),
            record_backward(pd.train(), forms.X, y, loss, lambda ps: paddle.optimizer.SGD(0.1, parameters=ps),
                            steps=2))


@pytest.mark.parametrize("how", ["same", "transpose"])
def test_a_square_head_under_another_name_is_judged_from_two_saved_records_by_the_layout_torchs_keeps(how):
    """The torch record made with PC455's layouts= keeps it (loose.LAYOUT), and judge_backward pairs the square
    weight with the port's decoder_weight in that layout: a correct port green, its gradient and steps judged; a port
    reading the head the other way round red at part.lm_head, forward and at its gradient. judge_forward on the two
    records is the same (it pairs calls, not weights). Before: "grad part.lm_head.weight (no counterpart on
    paddle)" on the correct port."""
    for plant in (False, True):
        t, p = square_records(how, plant)
        report, forward = judge_backward(t, p), judge_forward(t, p)
        head = next(r for r in report.grads if r.name == "grad part.lm_head.weight")
        assert report.passed == forward.passed == head.passed == (not plant), report.table()
        assert plant or all(r.passed for rows in report.steps for r in rows), report.table()
        assert not plant or forward.first_diverging == "part.lm_head", forward.table()


def test_a_torch_record_declaring_no_layout_for_a_square_head_says_the_layouts_that_pasted_judge_green():
    """Made without layouts=, the torch record cannot say which layout the port's square decoder_weight holds: its
    row says so in one line with the layouts= to record it with [PC452]; recorded with it as printed, green.
    Before: "no counterpart on paddle", nothing to do said."""
    import re
    t, p = square_records("same", declare=False)
    report = judge_backward(t, p)
    head = next(r for r in report.grads if r.name == "grad part.lm_head.weight")
    said = report.table()
    assert not report.passed and "[PC452]" in head.problems[0] and head.problems[0] in said, said
    layouts = eval(re.search(r"layouts=(\{.*?\})", head.problems[0]).group(1))
    assert layouts == {"LMHead": "same"}, said
    assert judge_backward(*square_records(layouts["LMHead"])).passed

def run_side(layouts=None):
    """`portcheck run`'s Paddle side in this process, its run's refusal a PipelineError."""
    from types import SimpleNamespace
    from portcheck.core.errors import PipelineError
    from portcheck.scripts.hooks_paddle import PaddleSide
    side = PaddleSide()
    side.run = SimpleNamespace(layouts=layouts or {}, config={}, torch_whole=True, refuse=PipelineError)
    return side


def test_run_places_a_linear_the_port_holds_bare_under_other_names_by_the_one_unclaimed_shape():
    """`portcheck run`'s Paddle side (start_from_torch, on torch's record and its weights in Paddle's layout, as the
    torch side writes them): torch's visual_projection weight and bias fill the port's vision_projection and
    vision_bias, and the port then computes torch's output. Before: "torch visual_projection.weight has no Paddle
    counterpart" [PC831]."""
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd, _ = renamed_projection()
    given = record_forward(pt.eval(), forms.X)
    given.update({f"state0/{k}": (v.T if v.ndim == 2 else v).numpy() for k, v in pt.state_dict().items()})
    placed = run_side().start_from_torch(pd, given, forms.X)[2]
    assert placed["visual_projection.weight"] == "vision_projection" and \
        placed["visual_projection.bias"] == "vision_bias", placed
    want = pt(torch.from_numpy(forms.X)).detach().numpy()
    np.testing.assert_allclose(pd.eval()(paddle.to_tensor(forms.X)).numpy(), want, atol=1e-6)
