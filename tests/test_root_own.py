"""The model's own forward as the place two runs part: a position table or a scale the root holds and applies itself,
not a submodule. report.first_diverging names it as report.differing does, "(model) (before <child>)", never the
child reading its output nor the model's output row. And the model itself named in a dict name map as "(model)" or
"" (names.resolve), the same as the regex rule that strips a prefix."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_forward, convert  # noqa: E402

D, L = 16, 6
IDS = {"input_ids": np.random.RandomState(0).randint(0, 50, (2, L)).astype("int64")}


def pair(plant=None):
    """An encoder whose root holds the position table and the embedding scale, adding and applying them in its own
    forward; plant: "table" (the port's rows reversed) or "scale" (sqrt(d) + 1) in the port's root."""
    class TorchEncoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.ModuleList([torch.nn.Linear(D, D) for _ in range(2)])

    class PaddleEncoder(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.layer = paddle.nn.LayerList([paddle.nn.Linear(D, D) for _ in range(2)])

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.encoder, self.norm = torch.nn.Embedding(50, D), TorchEncoder(), torch.nn.LayerNorm(D)
            self.pos = torch.nn.Parameter(torch.randn(L, D) * 0.1)

        def forward(self, input_ids):
            h = self.embed(input_ids) * D ** 0.5 + self.pos
            for layer in self.encoder.layer:
                h = torch.tanh(layer(h))
            return {"last_hidden_state": self.norm(h)}

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed, self.encoder, self.norm = paddle.nn.Embedding(50, D), PaddleEncoder(), paddle.nn.LayerNorm(D)
            self.pos = paddle.create_parameter([L, D], "float32")

        def forward(self, input_ids):
            table = self.pos[::-1] if plant == "table" else self.pos
            h = self.embed(input_ids) * (D ** 0.5 + (plant == "scale")) + table
            for layer in self.encoder.layer:
                h = paddle.tanh(layer(h))
            return {"last_hidden_state": self.norm(h)}

    torch.manual_seed(0)
    pt, pd = Torch(), Port()
    convert(pt, pd, inputs=IDS, layouts={"Torch": "same"})
    return pt.eval(), pd.eval()


def test_a_correct_port_whose_root_holds_a_table_and_a_scale_is_green():
    report = compare_forward(*pair(), IDS, isolate=True)
    assert report.passed and report.first_diverging is None, report.table()


@pytest.mark.parametrize("plant", ["table", "scale"])
@pytest.mark.parametrize("isolate", [False, True], ids=["cumulative", "isolate"])
def test_the_roots_own_bug_is_named_as_the_roots_computation_before_its_first_child(plant, isolate):
    """Named at the reader, encoder.layer.0 (or the model's output row); differing said (model) (before ...)."""
    report = compare_forward(*pair(plant), IDS, isolate=isolate)
    assert not report.passed
    assert report.first_diverging == "(model) (before encoder.layer.0)", report.table()
    assert report.first_diverging.paddle == "(model) (before encoder.layer.0)"
    assert report.first_call.found and report.first_call.line().startswith("(model): the first call whose output "
                                                                           "differs"), report.first_call.line()
    if isolate:
        assert report.differing == [report.first_diverging], report.table()


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


class Wrapper(torch.nn.Module):
    """A task wrapper handing on its inner model's output, as transformers' wrap their base models."""
    def __init__(self):
        super().__init__()
        self.model = Inner()

    def forward(self, x):
        return self.model(x)


class PaddleInner(paddle.nn.Layer):
    def __init__(self, plant=False):
        super().__init__()
        self.a, self.b, self.plant = paddle.nn.Linear(8, 8), paddle.nn.Linear(8, 8), plant

    def forward(self, x):
        h = self.a(x)
        return self.b(paddle.nn.functional.relu(h) if self.plant else paddle.tanh(h))


X = np.random.RandomState(1).randn(2, 8).astype("float32")


@pytest.mark.parametrize("name_map", [{"model": "(model)"}, {"model": ""}, [(r"^model\.", "")]],
                         ids=["(model)", "empty", "regex"])
def test_the_model_itself_named_in_a_name_map_as_model_or_empty(name_map):
    """{"model": "(model)"} sent torch's model.a to "(model).a", no Paddle module: each form pairs as the regex rule
    does, the correct port green, a plant (relu for tanh) red at model.b."""
    torch.manual_seed(0)
    pt = Wrapper().eval()
    for plant in (False, True):
        pd = PaddleInner(plant)
        convert(pt.model, pd)
        report = compare_forward(pt, pd, X, name_map=name_map)
        assert report.pairing.pairs["model.a"] == "a" and report.pairing.pairs["model.b"] == "b", report.pairs()
        assert report.passed is not plant, report.table()
        assert report.first_diverging == (("model.b" if plant else None)), report.table()


def test_the_model_itself_as_a_key_is_every_name_kept():
    torch.manual_seed(0)
    pt, pd = Inner().eval(), PaddleInner()
    convert(pt, pd)
    for name_map in ({"(model)": "(model)"}, {"": ""}, {"(model)": ""}):
        report = compare_forward(pt, pd, X, name_map=name_map)
        assert report.passed and report.pairing.pairs == {"(model)": "(model)", "a": "a", "b": "b"}, report.pairs()


class Shifted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.norm = torch.nn.Embedding(50, D), torch.nn.LayerNorm(D)

    def forward(self, input_ids):
        h = self.embed(input_ids) + 1.0
        return self.norm(h), h


class PaddleShifted(paddle.nn.Layer):
    def __init__(self, shift=1.0):
        super().__init__()
        self.embed, self.norm, self.shift = paddle.nn.Embedding(50, D), paddle.nn.LayerNorm(D), shift

    def forward(self, input_ids):
        h = self.embed(input_ids) + self.shift
        return self.norm(h), h


def test_the_roots_own_bug_its_child_hides_is_named_so_not_at_the_output_row():
    """A shift the model adds before a LayerNorm, which a constant shift leaves as it was: the first red row is the
    model's output row (model)[1]; with isolate=True, the model's own computation before norm."""
    torch.manual_seed(0)
    pt = Shifted().eval()
    for shift, named in ((1.0, None), (1.5, "(model) (before norm)")):
        pd = PaddleShifted(shift)
        convert(pt, pd, inputs=IDS, layouts={"Shifted": "same"})
        report = compare_forward(pt, pd, IDS, isolate=True)
        assert report.first_diverging == named and report.passed is (named is None), report.table()
        if named:
            assert compare_forward(pt, pd, IDS).first_diverging == "(model)[1]"  # no isolated run: its output row
