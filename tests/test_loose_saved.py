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


def lm_head(plant=False):
    """An lm head the port holds in a layer of its own, its weight [vocab, hidden] as OPTLMHead's decoder_weight.
    plant: the port reads it as [hidden, vocab] (a reshape, not the transpose)."""
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.lm_head = torch.nn.LayerNorm(16), torch.nn.Linear(16, 11, bias=False)

        def forward(self, h):
            return self.lm_head(self.norm(h))

    class LMHead(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.decoder_weight = self.create_parameter([11, 16])

        def forward(self, h):
            if plant:
                return paddle.matmul(h, self.decoder_weight.reshape([16, 11]))
            return paddle.matmul(h, self.decoder_weight, transpose_y=True)

    class PortHead(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm, self.lm_head = paddle.nn.LayerNorm(16), LMHead()

        def forward(self, h):
            return self.lm_head(self.norm(h))
    return Head(), PortHead(), (2, 5, 11)


BUILDS = {"a pooler's Linear against the port's dense_weight, dense_bias": (forms.pooler, "part"),
          "a block's bare [out, in] and 0-d against a Linear and [1]": (lambda plant: forms.block("out, in", plant),
                                                                         "part"),
          "CLIP's projections crossed at the root, 0-d against [1]": (forms.clip, "(model)"),
          "an lm head held in a layer of the port's own, [vocab, hidden]": (lm_head, "part"),
          "a head-split output (Linear3D)": (lambda plant: regroup.head_split(plant="heads" if plant else False)[:2],
                                             "query"),
          "a parameter with axes merged": (lambda plant: regroup.merged_axes(plant)[:2], "rel")}
LAYOUTS = {"a parameter with axes merged": {"Rel": "same"}}


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
                  "an lm head held in a layer of the port's own, [vocab, hidden]": (None, "grad part.lm_head.weight")}


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
