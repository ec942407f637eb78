"""Every refusal (and red line) that suggests an argument, provoked on a tiny correct pair: the argument is read out
of the message as printed (ast.literal_eval, what a user pastes) and given, and the call then goes through, green.
The name maps of pairing's ties (PC303, PC316, PC317) and the Fused layouts are pasted in test_pairing2
(test_every_refusals_suggested_map_pasted_as_printed_pairs_the_models, test_a_fused_module_without_its_layout_is_
refused_with_the_layout_that_pairs_it); SUGGESTING holds every message of the library that prints one, each with
the test that pastes it, so that a new one is red here until it is pasted too."""
import ast
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402

X = np.random.RandomState(0).randn(2, 4).astype("float32")
LIB = Path(__file__).resolve().parents[1] / "lib" / "portcheck"


def argument(text: str, name: str):
    """The value of `name=` as the message prints it (a dict or a list literal), evaluated as a literal."""
    found = re.search(rf"\b{name}=(\{{.*?\}}|\[.*?\])", text)
    assert found, text
    return ast.literal_eval(found.group(1))


class Scale(torch.nn.Module):
    """A layer type no layout rule knows, holding its square weight as Paddle does ([in, out], read x @ W): its shape
    fits either layout, so the run on the input settles it, or it is declared (a non-square one is placed by its
    counterpart's shape)."""
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 4) * .3)

    def forward(self, x):
        return x @ self.weight


class PaddleScale(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.weight = self.create_parameter([4, 4])

    def forward(self, x):
        return paddle.matmul(x, self.weight)


class Dense(paddle.nn.Layer):
    """A port's own type for torch's Linear: [in, out] and a bias, as paddle.nn.Linear holds them."""
    def __init__(self):
        super().__init__()
        self.weight, self.bias = self.create_parameter([4, 6]), self.create_parameter([6], is_bias=True)

    def forward(self, x):
        return paddle.matmul(x, self.weight) + self.bias


def wrapped(torch_part, paddle_part, paddle_buffer=False, torch_extra=False, paddle_extra=False):
    """A LayerNorm, then the part; outputs: the part's, and the norm's on the side told to return it too.
    paddle_buffer: the port reads an offset from a buffer of its own that torch computes in its forward."""
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.part = torch.nn.LayerNorm(4), torch_part

        def forward(self, x):
            h = self.norm(x) + torch.arange(4, dtype=torch.float32) / 4
            return (self.part(h), h) if torch_extra else self.part(h)

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm, self.part = paddle.nn.LayerNorm(4), paddle_part
            self.register_buffer("offset", paddle.arange(4, dtype="float32") / 4 if paddle_buffer else None)

        def forward(self, x):
            h = self.norm(x) + (self.offset if paddle_buffer else paddle.arange(4, dtype="float32") / 4)
            return (self.part(h), h) if paddle_extra else self.part(h)
    torch.manual_seed(0)
    paddle.seed(0)
    return Model(), Port()


def backward(pt, pd, width=6, **kw):
    y = np.zeros((2, width), np.float32)
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    return compare_backward(pt.train(), pd.train(), X, y, loss=loss, optimizer=sgd, steps=2, **kw)


class Kernel(paddle.nn.Layer):
    """A port's own type for torch's square Linear with no bias, its weight under another name, read [out, in]."""
    def __init__(self):
        super().__init__()
        self.kernel = self.create_parameter([4, 4])

    def forward(self, x):
        return paddle.matmul(x, self.kernel, transpose_y=True)


def test_a_linear_held_by_the_ports_own_type_converts_with_no_map():
    """Before: PC012 (torch part is a Linear but Paddle part is a Dense), its layouts= to paste."""
    pt, pd = wrapped(torch.nn.Linear(4, 6), Dense())
    pd.set_state_dict(convert(pt, pd, inputs=X))
    assert compare_forward(pt.eval(), pd.eval(), X).passed


@pytest.mark.parametrize("case", ["a type of its own on both sides (PC455)",
                                  "a square weight under another name (PC455)"])
def test_a_layout_refusals_layouts_pasted_as_printed_converts_and_is_green(case):
    """PC455: a square weight either layout fits, held by a Paddle type of its own (a Linear's under another name, or
    a type no rule knows on both sides): the layout printed first pasted, as its forward reads the weight. Given
    inputs=, convert runs the module both ways instead, and keeps the layout its forward reads: said without them."""
    square = "another name" in case
    pt, pd = wrapped(torch.nn.Linear(4, 4, bias=False), Kernel()) if square else wrapped(Scale(), PaddleScale())
    pd.set_state_dict(convert(pt, pd, inputs=X))
    held = pd.part.kernel if square else pd.part.weight
    np.testing.assert_array_equal(held.numpy(), pt.part.weight.detach().numpy())
    assert compare_forward(pt.eval(), pd.eval(), X).passed
    with pytest.raises(PipelineError, match=case[-6:-1]) as e:
        convert(pt, pd)
    layouts = argument(str(e.value), "layouts")
    pd.set_state_dict(convert(pt, pd, inputs=X, layouts=layouts))
    report = compare_forward(pt.eval(), pd.eval(), X, layouts=layouts)
    assert report.passed, report.table()
    trained = backward(pt, pd, layouts=layouts, width=4)
    assert trained.passed, trained.table()


def test_a_buffer_refusals_keep_pasted_as_printed_converts_and_is_green():
    pt, pd = wrapped(torch.nn.Linear(4, 6), paddle.nn.Linear(4, 6), paddle_buffer=True)
    with pytest.raises(PipelineError, match=r"pass keep=\['offset'\]") as e:
        convert(pt, pd, inputs=X)
    pd.set_state_dict(convert(pt, pd, inputs=X, keep=argument(str(e.value), "keep")))
    assert compare_forward(pt.eval(), pd.eval(), X).passed


@pytest.mark.parametrize("side", ["torch", "Paddle"])
def test_an_output_one_side_returns_alone_is_red_with_the_outputs_that_pasted_compare_the_rest_green(side):
    pt, pd = wrapped(torch.nn.Linear(4, 6), paddle.nn.Linear(4, 6), torch_extra=side == "torch",
                     paddle_extra=side == "Paddle")
    pd.set_state_dict(convert(pt, pd, inputs=X))
    report = compare_forward(pt.eval(), pd.eval(), X)
    assert not report.passed
    said = report.table()
    assert f"{side} returns [1] (a tensor [2, 4]), which" in said and "compare the rest with outputs=[0]" in said, said
    report = compare_forward(pt.eval(), pd.eval(), X, outputs=argument(said, "outputs"))
    assert report.passed and report.left_out == [f"{side} [1]"], report.table()


class Handle:
    """An object a model returns beside its output (a cache, a handle): neither a tensor, a number nor a string."""


def test_an_output_no_one_can_compare_is_red_with_the_outputs_that_pasted_leave_it_out_green():
    """Before: `leave it out with outputs=`, naming nothing to paste."""
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 6)

        def forward(self, x):
            return self.lin(x), Handle()

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.lin = paddle.nn.Linear(4, 6)

        def forward(self, x):
            return self.lin(x), Handle()
    torch.manual_seed(0)
    pt, pd = Model(), Port()
    pd.set_state_dict(convert(pt, pd, inputs=X))
    report = compare_forward(pt.eval(), pd.eval(), X)
    said = report.table()
    assert not report.passed and "(not comparable)" in said and "leave it out with outputs=[0]" in said, said
    report = compare_forward(pt.eval(), pd.eval(), X, outputs=argument(said, "outputs"))
    assert report.passed and report.left_out == ["torch [1]", "Paddle [1]"], report.table()


def test_outputs_of_other_names_are_said_as_a_dict_that_pasted_compares_them():
    """torch's dict {logits, hidden} against the port's (logits, ) tuple: paired by place, said {torch's: Paddle's}."""
    from portcheck.forward.chosen import shared
    t_all, p_all = {":logits": "out/a", ":hidden": "out/b"}, {"[0]": "out/c"}
    assert shared(t_all, p_all, {"out/a": "out/c"}) == {"logits": 0}
    assert shared({"": "out/a"}, {"[0]": "out/c", "[1]": "out/d"}, {"out/a": "out/c"}) == [0]


def residual_pair(plant=1.0):
    """A block whose port also returns its residual, first, as fused-residual ports do (`(residual, hidden)` against
    torch's `hidden`): both [2, 4], computed inline (neither the block's input nor an inner module's output), so
    place alone pairs torch's output with the residual. plant: the port's hidden scales its second branch by it."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin1, self.norm, self.lin2 = torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 4)

        def forward(self, x):
            r = x + self.lin1(x)
            return r + self.lin2(self.norm(r))

    class PortBlock(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.lin1, self.norm, self.lin2 = paddle.nn.Linear(4, 4), paddle.nn.LayerNorm(4), paddle.nn.Linear(4, 4)

        def forward(self, x):
            r = x + self.lin1(x)
            return r, r + self.lin2(self.norm(r)) * plant

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block, self.head = Block(), torch.nn.Linear(4, 6)

        def forward(self, x):
            return self.head(self.block(x))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.block, self.head = PortBlock(), paddle.nn.Linear(4, 6)

        def forward(self, x):
            return self.head(self.block(x)[1])
    torch.manual_seed(0)
    pt, pd = Model(), Port()
    pd.set_state_dict(convert(pt, pd, inputs=X))
    return pt.eval(), pd.eval()


def test_an_inner_modules_extra_output_paired_by_place_is_red_with_the_outputs_that_pasted_pair_it_green():
    """Before: an inner module took no outputs=; its extra output paired by place was red on a correct port, with no
    way through. The red line prints the outputs= naming that module; pasted, forward and backward are green, the
    output left out said in one line."""
    pt, pd = residual_pair()
    report = compare_forward(pt, pd, X)
    said = report.table()
    assert not report.passed and report.first_diverging == "block", said
    assert "compare those with outputs={'block': [1]} [PC462]" in said, said
    chosen = argument(said, "outputs")
    report = compare_forward(pt, pd, X, outputs=chosen)
    said = report.table()
    assert report.passed, said
    assert "block: outputs= pairs torch's block with Paddle's block[1]; left out, not judged: Paddle's block[0]" \
        in said, said
    assert report.counterparts["out/block"] == "out/block[1]"
    trained = backward(pt, pd, outputs=chosen)
    assert trained.passed, trained.table()


def test_a_plant_in_an_inner_output_outputs_compares_is_red_at_that_module():
    """The second branch of the port's block scaled by 1.01: the values still pair torch's output with the port's
    hidden (1e-2 away, the residual ~1), and the suggested outputs= pasted is red at the block, its children green."""
    pt, pd = residual_pair(plant=1.01)
    chosen = argument(compare_forward(pt, pd, X).table(), "outputs")
    assert chosen == {"block": [1]}
    report = compare_forward(pt, pd, X, outputs=chosen)
    assert not report.passed and report.first_diverging == "block", report.table()
    assert all(r.passed for r in report.rows if r.name.startswith("block."))


@pytest.mark.parametrize("outputs, code", [({"blocks": [1]}, "PC460"), ({"block": [2]}, "PC461"),
                                           ({"block": [1], "head": "x"}, "PC405")])
def test_an_inner_modules_outputs_naming_what_is_not_there_is_one_line(outputs, code):
    pt, pd = residual_pair()
    with pytest.raises(PipelineError, match=code):
        compare_forward(pt, pd, X, outputs=outputs)


@pytest.mark.parametrize("outputs", [{"block": [2]}, {"block": [1, 2]}])
def test_an_inner_modules_outputs_naming_what_is_not_there_prints_the_outputs_that_pasted_compare_it(outputs):
    """Before: PC461 listed the module's outputs and printed nothing to paste. Now it prints the outputs= naming what
    both sides' module returns: the names both return kept ([1, 2]: [1]), else the one the run's values pair
    ([2]: torch's lone output is Paddle's [1], not its [0])."""
    pt, pd = residual_pair()
    with pytest.raises(PipelineError, match="PC461") as refused:
        compare_forward(pt, pd, X, outputs=outputs)
    chosen = argument(str(refused.value), "outputs")
    assert chosen == {"block": [1]}, str(refused.value)
    report = compare_forward(pt, pd, X, outputs=chosen)
    assert report.passed and report.counterparts["out/block"] == "out/block[1]", report.table()


# every message of the library printing an argument to paste, as its source writes it: the test pasting it
PASTED_IN_PAIRING2 = "test_pairing2.py::test_every_refusals_suggested_map_pasted_as_printed_pairs_the_models"
FUSED_IN_PAIRING2 = "test_pairing2.py::test_a_fused_module_without_its_layout_is_refused_with_the_layout_that_" \
                    "pairs_it"
SUGGESTING = {
    ("mapping/tensors.py", "layouts={{'{first}':"): "test_a_layout_refusals_layouts_pasted_as_printed_converts_and_is_"
                                                    "green",
    ("mapping/loose.py", "layouts={{'{kind}':"): "test_a_layout_refusals_layouts_pasted_as_printed_converts_and_is_"
                                               "green",
    ("mapping/fused.py", 'layouts={"'): FUSED_IN_PAIRING2,  # fused.held_together's, convert's refusal
    ("mapping/ties.py", 'layouts={"'): FUSED_IN_PAIRING2,
    # fused.shown's (PC450) and fused.unjudged's (PC451), both pasted there
    ("mapping/fused.py", "layouts={{{entries}}}"): "test_pairing2.py::test_compare_forward_with_no_layouts_judges_each_"
                                                  "part_of_the_fused_module_the_ties_show",
    ("mapping/convert.py", "keep=['{key}']"): "test_a_buffer_refusals_keep_pasted_as_printed_converts_and_is_green",
    ("mapping/paired.py", "name_map={one}"): PASTED_IN_PAIRING2,
    ("mapping/settle.py", "name_map={entry}"): PASTED_IN_PAIRING2,
    ("mapping/ties.py", "name_map={maps[0]})\")"): PASTED_IN_PAIRING2,
    ("mapping/ties.py", "name_map={'"): PASTED_IN_PAIRING2,
    ("mapping/ties.py", "name_map={every}"): PASTED_IN_PAIRING2,
    ("forward/outputs.py", "outputs={rest!r}\""):
        "test_an_output_no_one_can_compare_is_red_with_the_outputs_that_pasted_leave_it_out_green",
    ("forward/outputs.py", "outputs={shared(t_all,"):
        "test_an_output_one_side_returns_alone_is_red_with_the_outputs_that_pasted_compare_the_rest_green",
    ("forward/chosen.py", "outputs={mended()!r}"):
        "test_an_inner_modules_outputs_naming_what_is_not_there_prints_the_outputs_that_pasted_compare_it",
    ("forward/outputs.py", "outputs={said[0]!r}"):
        "test_an_inner_modules_extra_output_paired_by_place_is_red_with_the_outputs_that_pasted_pair_it_green",
}
# where the same text is no suggestion: a docstring's example, a refusal quoting the argument it was given
NOT_SUGGESTING = {("mapping/fused.py", 'layouts={"c_attn":'), ("forward/chosen.py", "outputs={list(names)!r}:"),
                  ("forward/chosen.py", "outputs={outputs!r}:"), ("forward/chosen.py", "outputs={chosen.given!r}:"),
                  ("mapping/settle.py", "layouts={'<module>':"),  # a form to fill in: no candidate held
                  ("mapping/torch_fused.py", "layouts={'<module>':")}


def test_every_message_printing_an_argument_to_paste_has_its_pasting_test():
    """A message printing a name_map=, layouts=, keep= or outputs= literal that no test pastes is red here."""
    found = {(str(path.relative_to(LIB)), m.group(0)) for path in LIB.rglob("*.py")
             for m in re.finditer(r"\b(?:name_map|layouts|keep|outputs)=[{\[]\S{0,20}", path.read_text("utf-8"))}
    assert found == set(SUGGESTING) | NOT_SUGGESTING, (found - set(SUGGESTING) - NOT_SUGGESTING,
                                                       set(SUGGESTING) - found)
