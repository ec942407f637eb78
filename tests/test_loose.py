"""Tensors the two sides hold in other forms, converted and compared with no map (portcheck.mapping.loose): a
projection torch computes in a child Linear that the port holds as a bare parameter [in, out] of the model (and the
converse), a scalar 0-d on one side and [1] on the other, both at the model's root (CLIP's text_projection and
logit_scale, transformers' against paddlenlp's). Each form green clean, forward (cumulative and isolated) and
backward (3 steps), and red with a plant."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402

X = np.random.RandomState(0).randn(2, 8).astype("float32")


def pair(torch_linear=True, torch_0d=True, out=6, plant=None, out_in=False):
    """A two-layer encoder and a projection scaled by exp(scale): torch's projection a child Linear (torch_linear)
    or a bare [in, out] parameter of the model, the port's the other form; torch's scale 0-d (torch_0d) or [1],
    the port's the other. plant: "transposed" (the port reads its square projection as [out, in]) or "no exp".
    out_in: the port's bare projection held [out, in] as torch's Linear holds it, read with transpose_y (an lm_head
    weight of the model's own)."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.norm = torch.nn.Linear(8, 16), torch.nn.LayerNorm(16)
            self.proj = torch.nn.Linear(16, out, bias=False) if torch_linear else \
                torch.nn.Parameter(torch.randn(16, out) * 0.2)
            self.scale = torch.nn.Parameter(torch.tensor(0.5) if torch_0d else torch.tensor([0.5]))

        def forward(self, x):
            h = self.norm(self.enc(x))
            return (self.proj(h) if torch_linear else h @ self.proj) * self.scale.exp()

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.enc, self.norm = paddle.nn.Linear(8, 16), paddle.nn.LayerNorm(16)
            self.proj = self.create_parameter([out, 16] if out_in else [16, out]) if torch_linear else \
                paddle.nn.Linear(16, out, bias_attr=False)
            self.scale = self.create_parameter([1] if torch_0d else [])

        def forward(self, x):
            h = self.norm(self.enc(x))
            if torch_linear:
                h = paddle.matmul(h, self.proj, transpose_y=(plant == "transposed") != out_in)
            else:
                h = paddle.matmul(h, self.proj.weight, transpose_y=plant == "transposed")
            return h * (self.scale if plant == "no exp" else self.scale.exp())

    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = Torch(), Port()
    convert(pt, pd, inputs=X)
    return pt, pd


def train(pt, pd, out):
    y = np.random.RandomState(1).randn(2, out).astype("float32")
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    return compare_backward(pt.train(), pd.train(), X, y, loss=loss, optimizer=sgd, steps=3)


FORMS = [pytest.param(True, True, 6, id="torch Linear, Paddle bare [in, out]; 0-d against [1]"),
         pytest.param(False, False, 6, id="torch bare [in, out], Paddle Linear; [1] against 0-d"),
         pytest.param(True, False, 16, id="square: torch Linear, Paddle bare; [1] against 0-d")]


@pytest.mark.parametrize("torch_linear, torch_0d, out", FORMS)
def test_a_projection_and_a_scalar_held_in_other_forms_convert_and_compare_green_with_no_map(torch_linear, torch_0d,
                                                                                               out):
    """Before: convert refused (`proj (Linear)` has no counterpart, or the model's type has no layout, then `scale`
    shape () vs (1,)), and a map could not say it."""
    pt, pd = pair(torch_linear, torch_0d, out)
    with torch.no_grad():
        assert np.allclose(pt(torch.from_numpy(X)).numpy(), pd(paddle.to_tensor(X)).numpy(), atol=1e-5)
    report = compare_forward(pt.eval(), pd.eval(), X, isolate=True)
    assert report.passed, report.table()
    backward = train(pt, pd, out)
    assert backward.passed, backward.table()
    said = backward.table()
    assert "grad proj" in said and "grad scale" in said and "no counterpart" not in said, said


@pytest.mark.parametrize("plant, torch_linear, out", [("transposed", True, 16), ("transposed", False, 16),
                                                       ("no exp", True, 6)])
def test_a_port_misreading_the_projection_or_the_scalar_is_red(plant, torch_linear, out):
    pt, pd = pair(torch_linear, True, out, plant)
    report = compare_forward(pt.eval(), pd.eval(), X, isolate=True)
    assert not report.passed, report.table()
    assert not train(pt, pd, out).passed


@pytest.mark.parametrize("plant", [None, "no exp"])
def test_a_bare_projection_held_as_torchs_linear_holds_it_converts_with_no_map(plant):
    """The port's projection a bare [out, in] parameter of the model read with transpose_y (an lm_head weight
    [vocab, hidden]). Before: convert refused, `proj (Linear)` with no counterpart, give a name_map entry [PC315],
    which no map could give."""
    pt, pd = pair(True, True, 6, plant, out_in=True)
    report = compare_forward(pt.eval(), pd.eval(), X, isolate=True)
    assert report.passed is (plant is None), report.table()
    if plant is None:
        assert train(pt, pd, 6).passed


# ---------------------------------------------------------------- an input in another axis order

def time_major(seq, plant=None):
    """torch's block takes [batch, seq, 16]; the port's [batch, 16, seq] and transposes inside it. plant: "eps" (the
    port's norm epsilon 1e-3), "no transpose" (the port's model hands its block [batch, seq, 16] unturned)."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.norm = torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)

        def forward(self, x):
            return self.norm(self.lin(x))

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.block = torch.nn.Linear(8, 16), Block()

        def forward(self, x):
            return self.block(self.enc(x))

    class PortBlock(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.lin = paddle.nn.Linear(16, 16)
            self.norm = paddle.nn.LayerNorm(16, epsilon=1e-3 if plant == "eps" else 1e-5)

        def forward(self, x):
            return self.norm(self.lin(x.transpose([0, 2, 1])))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.enc, self.block = paddle.nn.Linear(8, 16), PortBlock()

        def forward(self, x):
            h = self.enc(x)
            return self.block(h if plant == "no transpose" else h.transpose([0, 2, 1]))

    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = Torch(), Port()
    x = np.random.RandomState(0).randn(2, seq, 8).astype("float32")
    convert(pt, pd, inputs=x)
    return compare_forward(pt.eval(), pd.eval(), x, isolate=True)


@pytest.mark.parametrize("seq", [5, 16])
def test_an_input_held_in_another_axis_order_is_fed_in_each_sides_layout_green(seq):
    """Before: isolate=True red at `block (its input)` on the correct port (shape [2, 5, 16] vs [2, 16, 5]; at seq
    16 torch's [batch, seq, 16] forced into the port's [batch, 16, seq] as it was: 2.4 apart)."""
    report = time_major(seq)
    assert report.passed, report.table()


@pytest.mark.parametrize("seq, plant, where", [(16, "eps", "block.norm"), (5, "eps", "block.norm"),
                                               (16, "no transpose", "block.lin")])
def test_a_plant_behind_the_axis_order_is_red_at_its_module(seq, plant, where):
    report = time_major(seq, plant)
    assert not report.passed
    assert where in report.table().rpartition("each module on torch's own values")[2].split("differs:")[-1], \
        report.table()


# ---------------------------------------------------------------- outputs one side returns and the other does not

def encoders(torch_returns, paddle_returns, plant=False):
    """An encoder returning its hidden states h, or also its own input x handed back ("hx", "xh"), or every step's
    output in a list, its input first ("l": [x, its Linear's output, h]), on each side; plant: the port's norm
    epsilon 1e-3."""
    def out(kind, h, x, lin=None):
        return {"h": h, "hx": (h, x), "xh": (x, h), "l": [x, lin, h]}[kind]

    def hidden(kind, o):
        return o[1] if kind == "xh" else o[0] if kind == "hx" else o[-1] if kind == "l" else o

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.norm = torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)

        def forward(self, x):
            lin = self.lin(x)
            return out(torch_returns, self.norm(lin), x, lin)

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.encoder, self.head = torch.nn.Linear(8, 16), Encoder(), torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.head(hidden(torch_returns, self.encoder(self.emb(x))))

    class PortEncoder(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.lin, self.norm = paddle.nn.Linear(16, 16), paddle.nn.LayerNorm(16, epsilon=1e-3 if plant else 1e-5)

        def forward(self, x):
            lin = self.lin(x)
            return out(paddle_returns, self.norm(lin), x, lin)

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.emb, self.encoder, self.head = paddle.nn.Linear(8, 16), PortEncoder(), paddle.nn.Linear(16, 4)

        def forward(self, x):
            return self.head(hidden(paddle_returns, self.encoder(self.emb(x))))

    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = Torch(), Port()
    x = np.random.RandomState(0).randn(2, 5, 8).astype("float32")
    convert(pt, pd, inputs=x)
    return compare_forward(pt.eval(), pd.eval(), x, isolate=True)


@pytest.mark.parametrize("torch_returns, paddle_returns", [("xh", "h"), ("hx", "h"), ("h", "hx"), ("h", "xh")])
def test_an_output_that_is_the_modules_own_input_handed_back_on_one_side_is_left_out_said(torch_returns,
                                                                                         paddle_returns):
    """Before: torch's (x, h) against the port's h paired x with h: red 2.8 at encoder[0] on the correct port; torch's
    h against the port's (h, x): the encoder's output compared with nothing, in silence."""
    report = encoders(torch_returns, paddle_returns)
    assert report.passed, report.table()
    side = "torch" if len(torch_returns) > 1 else "Paddle"
    assert f"encoder: {side}'s encoder[" in report.table() and "is its input handed back" in report.table()
    assert any(r.name.startswith("encoder") and "." not in r.name for r in report.paired), report.table()


@pytest.mark.parametrize("torch_returns, paddle_returns", [("h", "l"), ("l", "h")])
def test_an_output_that_is_an_inner_modules_output_handed_on_pairs_with_that_modules_counterpart(torch_returns,
                                                                                                paddle_returns):
    """paddlenlp's MPNetEncoder returns every layer's output in a list, its input first; transformers' the last
    layer's. Before: the first left after the input (the first layer's output) was paired with the last: red
    0.033 at encoder:last_hidden_state on the correct port (tools.zoo.families, mpnet)."""
    report = encoders(torch_returns, paddle_returns)
    assert report.passed, report.table()
    assert "paired each as the inner call's output it hands on" in report.table(), report.table()
    planted = encoders(torch_returns, paddle_returns, plant=True)
    assert not planted.passed and planted.first_diverging == "encoder.norm", planted.table()


def test_a_plant_behind_an_output_handed_back_is_named_at_its_module():
    report = encoders("xh", "h", plant=True)
    assert not report.passed
    assert "modules whose own computation differs: encoder.norm" in report.table(), report.table()


def test_a_nan_row_says_which_side_holds_it():
    """Before: the row said "NaN or Inf", whichever side held it."""
    pt, pd = pair()
    pd.proj.set_value(np.where(np.arange(96).reshape(16, 6) == 0, np.nan, pd.proj.numpy()).astype("float32"))
    report = compare_forward(pt.eval(), pd.eval(), X)
    assert not report.passed
    assert "NaN or Inf in paddle only (2 NaN, 0 Inf; the other side finite)" in report.table(), report.table()


@pytest.mark.parametrize("torch_nan, paddle_nan, said", [
    (True, False, "NaN or Inf in torch only (1 NaN, 0 Inf; the other side finite)"),
    (True, True, "NaN or Inf on both sides (torch 1 NaN, 0 Inf; paddle 1 NaN, 0 Inf)")])
def test_a_nan_row_says_torch_only_or_both_sides(torch_nan, paddle_nan, said):
    from portcheck.core import calibrated
    a, b = np.ones(4, np.float32), np.ones(4, np.float32)
    a[0], b[1] = (np.nan if torch_nan else 1.0), (np.nan if paddle_nan else 1.0)
    row = calibrated.measure("x", a, a.astype(np.float64), b)
    assert not row.passed and row.problem == said, row.problems


def test_the_pair_commands_exit_line_says_which_side_holds_the_nan(tmp_path, capsys):
    """Before: `exit 1: a value is NaN or Inf`, whichever side held it."""
    from portcheck import cli
    logits = np.ones((2, 3), np.float32)
    np.save(tmp_path / "t.npy", {"logits": logits}, allow_pickle=True)
    np.save(tmp_path / "p.npy", {"logits": np.where(np.eye(2, 3) > 0, np.nan, logits)}, allow_pickle=True)
    with pytest.raises(SystemExit) as e:
        cli.main(["pair", str(tmp_path / "t.npy"), str(tmp_path / "p.npy")])
    out = capsys.readouterr().out
    assert e.value.code == 1 and "exit 1: a value is NaN or Inf (logits: 2 NaN and 0 Inf in paddle)" in out, out


def test_compare_backward_compares_the_outputs_named_by_outputs():
    """A port returning (h, None) where torch returns h (paddlenlp's LukeModel: (words, entities=None, pooled)
    against transformers' ModelOutput, which drops a None). Before: compare_backward took no outputs=, its first
    forward red at (model)[1], None on one side alone, with no way to leave it out, though compare_forward's could."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.lin(x)

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.lin = paddle.nn.Linear(8, 4)

        def forward(self, x):
            return self.lin(x), None

    torch.manual_seed(0)
    pt, pd = Torch(), Port()
    convert(pt, pd, inputs=X)
    y = np.random.RandomState(1).randn(2, 4).astype("float32")
    loss = (lambda o, t: ((o - t) ** 2).mean(), lambda o, t: ((o[0] - t) ** 2).mean())
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    named = compare_backward(pt, pd, X, y, loss=loss, optimizer=sgd, outputs=[0])
    assert named.passed, named.table()
    with pytest.raises(PipelineError, match=r"\[PC405\]"):
        compare_backward(pt, pd, X, y, loss=loss, optimizer=sgd, outputs="logits")


# ---------------------------------------------------------------- a module the port computes inline in its parent

def towers(plant=None):
    """transformers' CLIP vision tower against paddlenlp's, small: torch's embeddings a module holding the class
    token itself (and a patch Linear, a position table), the tower's norm after it; the port's tower holds the
    class token, the patch Linear and the table itself and computes the embeddings inline. plant: "no positions"
    (the port adds no position table), "class last" (the class token concatenated after the patches)."""
    class Embeddings(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cls, self.patch = torch.nn.Parameter(torch.randn(16)), torch.nn.Linear(8, 16, bias=False)
            self.pos = torch.nn.Embedding(6, 16)

        def forward(self, x):
            h = torch.cat([self.cls.expand(x.shape[0], 1, -1), self.patch(x)], dim=1)
            return h + self.pos.weight

    class Tower(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings, self.pre_norm, self.body = Embeddings(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 16)

        def forward(self, x):
            return self.body(self.pre_norm(self.embeddings(x)))

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tower, self.head = Tower(), torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.head(self.tower(x)[:, 0])

    class PortTower(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.cls = self.create_parameter([16])
            self.patch, self.pos = paddle.nn.Linear(8, 16, bias_attr=False), paddle.nn.Embedding(6, 16)
            self.ln_pre, self.body = paddle.nn.LayerNorm(16), paddle.nn.Linear(16, 16)

        def forward(self, x):
            parts = [self.cls.unsqueeze([0, 1]).expand([x.shape[0], -1, -1]), self.patch(x)]
            h = paddle.concat(parts[::-1] if plant == "class last" else parts, axis=1)
            h = h if plant == "no positions" else h + self.pos.weight
            return self.body(self.ln_pre(h))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.tower, self.head = PortTower(), paddle.nn.Linear(16, 4)

        def forward(self, x):
            return self.head(self.tower(x)[:, 0])

    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = Torch(), Port()
    x = np.random.RandomState(0).randn(2, 5, 8).astype("float32")
    convert(pt, pd, inputs=x)
    return pt, pd, x


def test_a_module_the_port_computes_inline_in_its_parent_is_not_compared_with_the_parent():
    """Before: torch's tower.embeddings paired with Paddle's tower (the module holding its class token), the
    embeddings' output compared with the whole tower's: red 2.85 at vision_model.embeddings on paddlenlp's CLIP, a
    correct port. Its weights stay paired (convert, the gradients); its output is judged against the input the
    port's tower computes inline for its ln_pre, never against the tower's output."""
    pt, pd, x = towers()
    report = compare_forward(pt.eval(), pd.eval(), x, isolate=True)
    assert report.passed, report.table()
    assert "tower.embeddings: paired with Paddle's tower by the weights they hold, but they compute different " \
           "things (Paddle's tower.ln_pre (torch's tower.pre_norm) is inside Paddle's tower" in report.table()
    assert "its output is judged against the input Paddle's tower computes for its tower.ln_pre" in report.table()
    assert {"tower.pre_norm", "tower.embeddings"} <= {r.name for r in report.paired}
    assert report.counterparts["out/tower.embeddings"] == "in/tower.ln_pre"
    y = np.random.RandomState(1).randn(2, 4).astype("float32")
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    backward = compare_backward(pt.train(), pd.train(), x, y, loss=loss, optimizer=sgd, steps=2)
    assert backward.passed and "grad tower.embeddings.cls" in backward.table(), backward.table()


@pytest.mark.parametrize("plant", ["no positions", "class last"])
def test_a_plant_in_what_the_port_computes_inline_is_red_at_the_module_computing_it(plant):
    """Before: red at tower.pre_norm (its input over), the module after it, and isolated at the model before it:
    the place one level off. Now at torch's tower.embeddings, its output against the input Paddle's tower computed
    for its ln_pre, with its own input within, in both verdicts."""
    pt, pd, x = towers(plant)
    report = compare_forward(pt.eval(), pd.eval(), x, isolate=True)
    assert not report.passed
    first_over = next(r for r in report.paired if not r.passed)
    assert first_over.name == "tower.embeddings" and first_over.input_ok is True, report.table()
    assert report.first_diverging == "tower.embeddings"
    assert [d.both for d in report.differing] == ["tower.embeddings (Paddle: tower)"], report.table()


def test_compare_backward_leaves_out_a_model_output_returned_by_another_convention_with_outputs():
    """paddlenlp's ChineseCLIPModel returns a pooler output where transformers' returns None: red on its own, and
    compare_backward had no outputs= to leave it out (its first forward red whatever the steps)."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.lin(x), None

    class Port(paddle.nn.Layer):
        def __init__(self, plant=False):
            super().__init__()
            self.lin, self.plant = paddle.nn.Linear(8, 4), plant

        def forward(self, x):
            y = self.lin(x) * (1.01 if self.plant else 1.0)
            return y, y[:, 0]

    y = np.random.RandomState(1).randn(2, 4).astype("float32")
    loss = (lambda o, t: ((o[0] - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    verdicts = []
    for outputs, plant in ((None, False), ([0], False), ([0], True)):
        torch.manual_seed(0)
        pt, pd = Torch(), Port(plant)
        pd.set_state_dict(convert(pt, pd, inputs=X))
        report = compare_backward(pt.train(), pd.train(), X, y, loss=loss, optimizer=sgd, steps=1, outputs=outputs)
        verdicts.append(report.passed)
        if outputs:
            assert report.forward.left_out == ["torch [1]", "Paddle [1]"], report.forward.left_out
    assert verdicts == [False, True, False]


def test_a_map_pasted_from_the_pairing_keeps_the_inline_module_uncompared():
    """The zoo pins each family's pairing as a map for its plants: the pair named there was compared again, red."""
    pt, pd, x = towers()
    pinned = {t: p for t, p in compare_forward(pt.eval(), pd.eval(), x).pairing.modules().items() if t != "(model)"}
    assert pinned["tower.embeddings"] == "tower"
    assert compare_forward(pt.eval(), pd.eval(), x, pinned).passed
    pt, pd, x = towers("no positions")
    report = compare_forward(pt.eval(), pd.eval(), x, pinned)
    assert not report.passed and next(r for r in report.paired if not r.passed).name == "tower.embeddings"


def test_outputs_named_of_a_paddle_run_that_stopped_say_the_stop():
    """Before: outputs= refused the run, `the Paddle model's output has no logits (its outputs: )` [PC404], where
    the Paddle model had raised (paddlenlp's layer_norm takes no epsilon over 1e-3)."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 4)

        def forward(self, x):
            return {"logits": self.lin(x)}

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.lin = paddle.nn.Linear(8, 4)

        def forward(self, x):
            return {"logits": paddle.nn.functional.layer_norm(self.lin(x), [4], epsilon=1e-2)}

    torch.manual_seed(0)
    pt, pd = Torch(), Port()
    report = compare_forward(pt.eval(), pd.eval(), X, outputs=["logits"])
    assert not report.passed and "epsilon" in report.stopped["paddle"], report.table()
    # nor is a run that stopped told its outputs differ in structure (`compare the rest with outputs=[]`): the stop
    for report in (report, compare_forward(pt.eval(), pd.eval(), X)):
        assert "differ in structure" not in report.table(), report.table()
        assert "(model):logits: the Paddle run stopped before returning it" in report.table(), report.table()


def test_a_paddle_run_that_stopped_inside_a_module_names_that_module_first():
    """The Paddle block raises after its first Linear returned (a reshape to a wrong shape): every module that ran
    within, the block never returned, so it pairs by name; first_diverging names it, not the model's missing output
    (a stop in a child named under its parent's counterpart: tests/test_split.py's o_proj)."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.b(self.a(x))

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blk, self.out = Block(), torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.out(self.blk(x))

    class PortBlock(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.a, self.b = paddle.nn.Linear(8, 8), paddle.nn.Linear(8, 8)

        def forward(self, x):
            return self.b(self.a(x).reshape([3, 5, 7]))  # the bug

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.blk, self.out = PortBlock(), paddle.nn.Linear(8, 4)

        def forward(self, x):
            return self.out(self.blk(x))

    torch.manual_seed(0)
    pt, pd = Torch().eval(), Port().eval()
    convert(pt, pd)
    report = compare_forward(pt, pd, X)
    assert not report.passed and "ReshapeOp" in report.stopped["paddle"], report.table()
    assert report.first_diverging == "blk" and report.stopped_in == {"paddle": "blk"}, report.table()
    assert next(r for r in report.paired if r.name == "blk.a").passed, report.table()


# ---------------------------------------------------------------- a head torch ties, the port holds apart

def tied_head():
    """torch's head tied to its embedding (one weight); the port's a bare [vocab, hidden] parameter of the model
    of its own, read with transpose_y (paddlenlp's lm_head_weight): the same forward, two weights trained."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.norm = torch.nn.Embedding(20, 8), torch.nn.LayerNorm(8)
            self.lm_head = torch.nn.Linear(8, 20, bias=False)
            self.lm_head.weight = self.emb.weight

        def forward(self, x):
            return self.lm_head(self.norm(self.emb(x)))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.emb, self.norm = paddle.nn.Embedding(20, 8), paddle.nn.LayerNorm(8)
            self.lm_head_weight = self.create_parameter([20, 8])

        def forward(self, x):
            return paddle.matmul(self.norm(self.emb(x)), self.lm_head_weight, transpose_y=True)

    torch.manual_seed(0)
    paddle.seed(0)
    return Torch(), Port()


def test_a_tied_head_the_port_holds_apart_converts_green_forward_and_its_training_is_red():
    """Before: convert refused, `Paddle keys no torch tensor fills: lm_head_weight` [PC014] with no way through."""
    pt, pd = tied_head()
    ids = np.random.RandomState(0).randint(0, 20, (2, 5)).astype("int64")
    convert(pt, pd, inputs=ids)
    assert compare_forward(pt.eval(), pd.eval(), ids, isolate=True).passed
    y = np.random.RandomState(1).randn(2, 5, 20).astype("float32")
    loss = (lambda o, t: ((o - t) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    backward = compare_backward(pt.train(), pd.train(), ids, y, loss=loss, optimizer=sgd, steps=2)
    assert not backward.passed and backward.first_diverging == "grad lm_head.weight", backward.table()
