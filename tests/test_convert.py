"""weights/torch2paddle.py through the library's converter: an exact round trip, transposes chosen by module type,
and every refusal, all of a run's problems named at once."""
import hashlib
import sys

import numpy as np
import paddle
import pytest
import torch

from portcheck.core.errors import PipelineError
from conftest import error_line, run
from portcheck.mapping.convert import convert
from portcheck.mapping.tensors import torch_layouts
from portcheck.mapping.modules import stranded

CONVERT = "weights/torch2paddle.py"


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_round_trip_is_exact(minilm_home):
    torch_state = torch.load(minilm_home / "weights/torch_weight.bin", weights_only=True)
    paddle_state = paddle.load(str(minilm_home / "weights/paddle_weight.pdparams"))
    assert set(torch_state) == set(paddle_state)
    transposed = 0
    for key, t in torch_state.items():
        p = paddle_state[key].numpy()
        is_linear = key.endswith(".weight") and t.ndim == 2 and not key.startswith("embeddings.")
        transposed += is_linear
        back = p.T if is_linear else p  # Paddle -> torch layout
        np.testing.assert_array_equal(back, t.numpy(), err_msg=key)
    assert transposed == 6 * 6 + 1  # q, k, v, attention out, intermediate, output per layer + pooler


class Odd(torch.nn.Module):
    """A Linear with no usual name and a square Embedding: name patterns get both wrong."""

    def __init__(self):
        super().__init__()
        self.mixer = torch.nn.Linear(3, 3)
        self.table = torch.nn.Embedding(3, 3)


class PaddleOdd(paddle.nn.Layer):
    """Odd's Paddle twin; `out` sizes the mixer's output, `table` and `extra` add or drop a parameter."""

    def __init__(self, out=3, table=True, extra=False):
        super().__init__()
        self.mixer = paddle.nn.Linear(3, out)
        if table:
            self.table = paddle.nn.Embedding(3, 3)
        if extra:
            self.extra = self.create_parameter([3])


class Norm(torch.nn.BatchNorm1d):
    """A BatchNorm holding a tensor of its own under the Paddle name of its running mean: two tensors, one key."""

    def __init__(self):
        super().__init__(3)
        self.register_buffer("_mean", torch.zeros(3))


class Normed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Norm()


class PaddleNormed(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.norm = paddle.nn.BatchNorm1D(3)


def test_transpose_is_decided_by_module_type():
    model = Odd()
    state = model.state_dict()
    out = convert(model, PaddleOdd())
    assert out.transposed == 1
    np.testing.assert_array_equal(out["mixer.weight"], state["mixer.weight"].numpy().T)
    np.testing.assert_array_equal(out["table.weight"], state["table.weight"].numpy())


def test_transformers_conv1d_is_known_and_other_models_do_not_load_transformers(monkeypatch):
    """transformers' Conv1D (GPT-2's) keeps its [in, out] weight, a Paddle Linear's layout; the table takes it from
    the already loaded module, so reading a model without one never imports transformers."""
    from transformers.pytorch_utils import Conv1D
    weight = torch_layouts(torch.nn.Sequential(Conv1D(6, 4)))["0.weight"]
    assert weight.kinds == ("Linear",) and not weight.transposed and weight.array.shape == (4, 6)

    asked = []

    class Watch:  # an import finder that only notes what is looked for
        def find_spec(self, name, path=None, target=None):
            asked.append(name)

    monkeypatch.delitem(sys.modules, "transformers.pytorch_utils")
    monkeypatch.setattr(sys, "meta_path", [Watch()] + sys.meta_path)
    torch_layouts(torch.nn.Sequential(torch.nn.Linear(4, 6)))
    assert not [name for name in asked if name.startswith("transformers")], asked


@pytest.mark.parametrize("torch_model, paddle_model, name_map, expected", [
    (Odd, lambda: PaddleOdd(table=False), None, "have no counterpart in the Paddle model: table (Embedding)"),
    (Odd, lambda: PaddleOdd(extra=True), None, "Paddle keys no torch tensor fills: extra"),
    (Odd, lambda: PaddleOdd(out=4), {"mixer": "mixer"}, "mixer.bias -> mixer.bias: shape (3,) (after the layout "
                                                        "rule) vs Paddle (4,)"),
    (Normed, PaddleNormed, {"norm": "norm"}, "Paddle key norm._mean is filled twice (from norm.running_mean and "
                                             "norm._mean)"),
])
def test_convert_refuses_and_leaves_the_paddle_model_as_it_was(tmp_path, torch_model, paddle_model, name_map, expected):
    pt, pd = torch_model(), paddle_model()
    before = {k: v.numpy().copy() for k, v in pd.state_dict().items()}
    with pytest.raises(PipelineError) as e:
        convert(pt, pd, name_map, path=tmp_path / "out.pdparams")
    assert expected in str(e.value)
    assert not (tmp_path / "out.pdparams").exists()
    assert all(np.array_equal(v.numpy(), before[k]) for k, v in pd.state_dict().items())


def test_convert_names_every_problem_at_once():
    """A shape that differs and a Paddle key nothing fills, in one run's one line."""
    with pytest.raises(PipelineError, match=r"\(3 problem\(s\)") as e:
        convert(Odd(), PaddleOdd(out=4, extra=True), {"mixer": "mixer"})
    for said in ("Paddle keys no torch tensor fills: extra", "mixer.weight -> mixer.weight: shape (3, 3)",
                 "mixer.bias -> mixer.bias: shape (3,)"):
        assert said in str(e.value)


@pytest.mark.parametrize("edit, expected", [
    (lambda s: s.pop("pooler.dense.bias"), ["missing: pooler.dense.bias"]),
    (lambda s: s.update({"cls.predictions.bias": torch.zeros(3)}), ["unexpected: cls.predictions.bias"]),
    (lambda s: s.update({"pooler.dense.bias": torch.zeros(7)}), ["shape mismatch: pooler.dense.bias (7,) != (32,)"]),
    # every problem of the checkpoint at once, not the first of them
    (lambda s: (s.pop("pooler.dense.bias"), s.pop("pooler.dense.weight"), s.update(extra=torch.zeros(1))),
     ["missing: pooler.dense.bias, pooler.dense.weight", "unexpected: extra"]),
])
def test_script_refuses_and_writes_nothing(home, edit, expected):
    state = torch.load(home / "weights/torch_weight.bin", weights_only=True)
    edit(state)
    torch.save(state, home / "weights/torch_weight.bin")
    before = digest(home / "weights/paddle_weight.pdparams")
    proc = run(CONVERT, home=home, check=2)
    line = error_line(proc)
    assert "refusing to convert, nothing written" in line
    assert all(said in line for said in expected), line
    assert digest(home / "weights/paddle_weight.pdparams") == before


def test_script_summary_line(home):
    proc = run(CONVERT, home=home, check=0)
    # 2 layers x (query, key, value, attention output, intermediate, output) + pooler
    assert "39 tensors, 13 Linear weights transposed" in proc.stdout


def test_export_rejects_a_foreign_checkpoint(home, tmp_path):
    (tmp_path / "config.json").write_text('{"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1,'
                                          ' "intermediate_size": 64}')
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    torch.save({"embeddings.word_embeddings.weight": torch.zeros(30522, 32)}, tmp_path / "pytorch_model.bin")
    proc = run("weights/torch_bert_weights.py", "--model_dir", tmp_path, home=home, check=2)
    assert "missing:" in error_line(proc)


def test_export_reads_a_bert_for_pretraining_checkpoint(home, tmp_path):
    """bert-base-uncased's layout: `bert.` prefix, pretraining heads, TF-era LayerNorm gamma/beta, a .bin file."""
    import json
    state = torch.load(home / "weights/torch_weight.bin", weights_only=True)
    legacy = {"bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
              for k, v in state.items()}
    legacy["cls.predictions.bias"] = torch.zeros(30522)
    legacy["bert.embeddings.position_ids"] = torch.arange(512)[None]
    torch.save(legacy, tmp_path / "pytorch_model.bin")
    config = json.loads((home / "weights/config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "architectures": ["BertForPreTraining"]}))
    (tmp_path / "vocab.txt").write_text((home / "weights/vocab.txt").read_text())
    before = torch.load(home / "weights/torch_weight.bin", weights_only=True)
    proc = run("weights/torch_bert_weights.py", "--model_dir", tmp_path, home=home, check=0)
    assert "not exported (heads, buffers): 2 keys" in proc.stdout
    after = torch.load(home / "weights/torch_weight.bin", weights_only=True)
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in after)


def test_a_module_no_name_map_can_pair_says_the_models_differ_and_what_to_compare():
    """transformers' BigBird classification head (dense, gelu, out_proj on the first token) against paddlenlp's
    (the pooler's tanh, then a linear): torch's classifier.dense has no Paddle module of its sizes left, so the line
    says the models differ there and names the part both hold, not a name_map that cannot exist. A Paddle module of
    its sizes under another name keeps the name_map advice."""
    import transformers
    from paddlenlp import transformers as nlp
    size = dict(vocab_size=60, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                max_position_embeddings=32, num_labels=2)
    torch.manual_seed(0)
    pt = transformers.BigBirdForSequenceClassification(
        transformers.BigBirdConfig(attention_type="original_full", **size)).eval()
    pd = nlp.BigBirdForSequenceClassification(nlp.BigBirdConfig(
        attention_type="default_attention", hidden_act="gelu", activation="gelu", attn_dropout=0.0, act_dropout=0.0,
        **size))
    with pytest.raises(PipelineError) as e:
        convert(pt, pd, inputs=torch.randint(1, 60, (2, 8)))
    assert "classifier.dense (Linear): no unpaired Paddle module holds tensors of their sizes, so no name_map can " \
           "pair them" in str(e.value) and "compare_forward(torch_model.bert, paddle_model.bigbird, ...)" in str(e.value)
    assert "[PC315]" in str(e.value)

    left, paired = {"classifier.dense": [256, 16]}, {"": "", "bert": "bigbird", "bert.pooler": "bigbird.pooler"}
    assert stranded(left, [[16, 256]], paired) == ""  # a free module of its sizes: a name_map can pair it
    assert "compare_forward(torch_model.bert, paddle_model.bigbird" in stranded(left, [[2, 32]], paired)


def test_a_module_a_fused_layout_pairs_is_not_said_to_differ():
    """GPT-2's c_attn (one Linear, [q | k | v]) against q, k and v: without inputs= the line gives the Fused entry that
    pairs them, never "the two models differ there"; with the entry, or with inputs= (the run settles the layout), the
    same model converts."""
    from portcheck import Fused

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.out = torch.nn.Linear(8, 24), torch.nn.Linear(8, 8)

        def forward(self, x):
            q, k, v = self.c_attn(x).chunk(3, -1)
            return self.out(q * k + v)

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.out = (paddle.nn.Linear(8, 8) for _ in range(4))

        def forward(self, x):
            return self.out(self.q(x) * self.k(x) + self.v(x))

    pt, pd = Torch(), Port()
    x = np.random.RandomState(0).randn(2, 8).astype("float32")
    with pytest.raises(PipelineError) as e:
        convert(pt, pd)
    said = str(e.value)
    assert "layouts={'c_attn': portcheck.Fused(('q', 'k', 'v'))} (heads=n if they go per head) makes them one " \
        "model there" in said and "[PC315]" in said
    assert "differ" not in said, said
    convert(pt, pd, layouts={"c_attn": Fused(("q", "k", "v"))}, inputs=x)
    assert "c_attn: their columns [q | k | v] one after the other, settled by a run" in convert(pt, pd, inputs=x).said
    np.testing.assert_allclose(pt(torch.from_numpy(x)).detach().numpy(), pd(paddle.to_tensor(x)).numpy(), atol=1e-6)


class _TorchLM(torch.nn.Module):
    def __init__(self, tied: bool):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        if tied:
            self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.embed(ids))


class _PaddleLM(paddle.nn.Layer):
    """Its head reads the embedding's weight, as a tie_word_embeddings=True config builds it: one tensor, two keys."""

    def __init__(self):
        super().__init__()
        self.embed = paddle.nn.Embedding(10, 4)
        self.head = paddle.nn.Linear(4, 10, bias_attr=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return paddle.matmul(self.embed(ids), self.head.weight, transpose_y=True)


def test_a_head_tied_in_paddle_and_not_in_torch_is_refused_naming_the_tie():
    """transformers' LlamaConfig ties no head by default, paddleformers' does: torch's two tensors would fill one
    Paddle tensor, the last key set winning. Refused, naming both keys; a torch model tied as Paddle's converts."""
    ids = np.array([[1, 2, 3]])
    torch.manual_seed(0)
    with pytest.raises(PipelineError, match=r"Paddle embed.weight and head.weight are one tensor \(tied\).*"
                                            r"tie_word_embeddings"):
        convert(_TorchLM(tied=False), _PaddleLM(), inputs=(ids,), layouts={"Linear": "same"})
    state = convert(_TorchLM(tied=True), _PaddleLM(), inputs=(ids,), layouts={"Linear": "same"})
    assert "embed.weight" in state


def test_a_layer_only_the_port_holds_is_listed_whole_not_its_statistics_kept():
    """PaddleClas's ResNet-vd first block holds a 1x1 conv + BN shortcut timm's has not: its BatchNorm's statistics
    have no torch tensor, and neither do its weights. keep= (Paddle's own value for a buffer the torch model computes)
    is no answer there: the layer is listed with its weights. A buffer of a layer both hold still names keep=."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.head = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), \
                torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.head(torch.relu(self.bn(self.conv(x))).mean((2, 3)))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.head = paddle.nn.Conv2D(3, 8, 3, padding=1), paddle.nn.BatchNorm2D(8), \
                paddle.nn.Linear(8, 4)
            self.short = paddle.nn.Sequential(paddle.nn.Conv2D(3, 8, 1), paddle.nn.BatchNorm2D(8))

        def forward(self, x):
            return self.head(paddle.nn.functional.relu(self.bn(self.conv(x)) + self.short(x)).mean((2, 3)))

    x = np.random.RandomState(0).randn(2, 3, 8, 8).astype("float32")
    with pytest.raises(PipelineError) as e:
        convert(Torch().eval(), Port(), inputs=x)
    assert "keep=" not in str(e.value) and "short.1.weight, short.1.bias, short.1._mean, short.1._variance" \
        in str(e.value), e.value


def test_a_run_stopping_partway_says_the_rest_was_paired_by_definition_order():
    """A Paddle port that raises on convert's inputs after its first layers (PaddleClas's Twins-SVT cuts 7 x 7
    windows a 64 x 64 map does not divide): what ran is paired by the run, the rest by definition order alone, said
    in convert's lines, never silently."""
    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = torch.nn.Linear(4, 6), torch.nn.Linear(6, 6), torch.nn.Linear(6, 2)

        def forward(self, x):
            return self.c(self.b(self.a(x)))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = paddle.nn.Linear(4, 6), paddle.nn.Linear(6, 6), paddle.nn.Linear(6, 2)

        def forward(self, x):
            h = self.a(x)
            if h.shape[0] % 7:
                raise ValueError("windows of 7 do not divide the batch")
            return self.c(self.b(h))

    state = convert(Torch().eval(), Port(), inputs=np.ones((2, 4), "float32"))
    assert "the Paddle model's forward stopped on inputs (ValueError: windows of 7 do not divide the batch): the " \
           "modules after it paired by their definition order, not by the run" in state.said, state.said
    assert "stopped" not in convert(Torch().eval(), Port(), inputs=np.ones((7, 4), "float32")).said


def test_a_fused_module_whose_parts_description_divides_by_its_shares_converts():
    """paddleformers' ERNIE 4.5 at 6 query heads over 2 key-value groups: each part's description (children, tensors,
    shapes: 5 numbers for a Linear with no bias) divides by the parts' shares [q x3 | k | v], and was cut into
    columns as if it were a tensor, convert ending in an IndexError. Its parts are described, never cut."""
    d, wide = 4, 8

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj = (torch.nn.Linear(wide, n, bias=False) for n in (3 * d, d, d))

        def forward(self, x):
            return self.q_proj(x) * torch.cat([self.k_proj(x) + self.v_proj(x)] * 3, -1)

    class PortAttention(paddle.nn.Layer):
        def __init__(self, plant=False):
            super().__init__()
            self.qkv_proj, self.plant = paddle.nn.Linear(wide, 5 * d, bias_attr=False), plant

        def forward(self, x):
            q, k, v = paddle.split(self.qkv_proj(x), [3 * d, d, d], -1)
            return q * paddle.concat([k - v if self.plant else k + v] * 3, -1)

    pt, x = torch.nn.Sequential(Attention()), np.random.RandomState(0).randn(2, 3, wide).astype("float32")
    pd = paddle.nn.Sequential(PortAttention())
    state = convert(pt, pd, inputs=x)
    assert "0.qkv_proj: their columns [q_proj x3 | k_proj | v_proj] one after the other" in state.said, state.said
    from portcheck import compare_forward
    assert compare_forward(pt, pd, x, layouts=state.fused_found).passed
    with pytest.raises(PipelineError, match=r"\[PC456\]"):  # the port's v subtracted: no layout gives torch's
        convert(pt, paddle.nn.Sequential(PortAttention(plant=True)), inputs=x)
