"""Pairing habits of library models, each on a small pair built here: ties the run's values settle, a tied head,
an embedding both halves of an encoder-decoder share, a Linear fed [batch * seq, hidden] against [batch, seq,
hidden], subclassed embeddings, a config difference said as one, and every refusal's suggested map pasted as
printed."""
import ast
import re
import signal

import numpy as np
import pytest

from portcheck import Fused
from portcheck.core.errors import PipelineError

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402
from portcheck.core import record  # noqa: E402

IDS = np.random.RandomState(0).randint(0, 50, (2, 6)).astype(np.int64)


def suggested(error: str):
    """The name_map a refusal suggests for all its ties, as printed (literal_eval: what a user pastes)."""
    return ast.literal_eval(re.search(r"says which \(name_map=(\[.*?\]) takes each", error).group(1))


def train(pt, pd, inputs, targets, steps=2, **kw):
    """compare_backward with SGD and a mean-squared loss on both sides."""
    return compare_backward(pt, pd, inputs, targets,
                            (torch.nn.functional.mse_loss, paddle.nn.functional.mse_loss),
                            (lambda ps: torch.optim.SGD(ps, lr=0.1),
                             lambda ps: paddle.optimizer.SGD(learning_rate=0.1, parameters=ps)), steps=steps, **kw)


# ---------------------------------------------------------------- a tied head

class TiedTorch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.body = torch.nn.Embedding(50, 16), torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.emb.weight  # tied: one tensor, two modules

    def forward(self, ids):
        return self.head(torch.tanh(self.body(self.emb(ids))))


class TiedPaddle(paddle.nn.Layer):
    def __init__(self, untie=False):
        super().__init__()
        self.emb, self.body = paddle.nn.Embedding(50, 16), paddle.nn.Linear(16, 16)
        self.head = paddle.nn.Linear(16, 50, bias_attr=False) if untie else None

    def forward(self, ids):
        h = paddle.tanh(self.body(self.emb(ids)))
        return self.head(h) if self.head is not None else paddle.matmul(h, self.emb.weight, transpose_y=True)


def test_a_tied_head_converts_against_one_paddle_parameter_and_trains_green():
    torch.manual_seed(0)
    pt, pd = TiedTorch(), TiedPaddle()
    state = convert(pt, pd, inputs=IDS)
    assert sorted(state) == ["body.bias", "body.weight", "emb.weight"]
    assert compare_forward(pt, pd, IDS).passed
    target = np.zeros((2, 6, 50), np.float32)
    report = train(pt, pd, IDS, target)
    assert report.passed, report.table()
    assert [r.name for r in report.grads] == ["grad emb.weight", "grad body.weight", "grad body.bias"]


def test_a_port_that_unties_the_head_is_red_in_training_at_the_embedding():
    """Paddle's own head Linear filled from the tied weight (transposed): the same forward, but the embedding's
    gradient lacks the head's share, and the head's gradient the embedding's."""
    torch.manual_seed(0)
    pt, pd = TiedTorch(), TiedPaddle(untie=True)
    state = convert(pt, pd, inputs=IDS)
    assert np.array_equal(state["head.weight"], pt.emb.weight.detach().numpy().T)
    assert compare_forward(pt, pd, IDS).passed
    report = train(pt, pd, IDS, np.zeros((2, 6, 50), np.float32))
    assert not report.passed and report.first_diverging_gradient == "grad head.weight", report.table()


def test_a_map_sending_the_tied_head_to_the_embedding_is_one_line_at_once():
    """Issue 63: name_map={"emb": "emb", "head": "emb"} on a tied head did not return in 400 s (the tie the map made
    itself was settled again and again); now one line, in well under a second (0.2-0.4 s measured)."""
    def stuck(signum, frame):
        raise TimeoutError("convert did not return in 20 s")
    class Torch(torch.nn.Module):  # the issue's: a 10 x 4 embedding, the head its weight, nothing between
        def __init__(self):
            super().__init__()
            self.emb, self.head = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, ids):
            return self.head(self.emb(ids))

    class Paddle(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.emb = paddle.nn.Embedding(10, 4)

        def forward(self, ids):
            return paddle.matmul(self.emb(ids), self.emb.weight, transpose_y=True)

    before = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(20)
    try:
        with pytest.raises(PipelineError, match="torch head is a Linear but Paddle emb is a Embedding"):
            convert(Torch(), Paddle(), name_map={"emb": "emb", "head": "emb"}, inputs=IDS % 10)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def test_convert_refuses_a_map_entry_naming_no_module_as_compare_forward_does():
    """convert(name_map={"nosuch": ...}) was accepted silently (the entry paired nothing)."""
    said = r"name_map entries naming no module: 'nosuch': 'emb' \(the torch model has no module 'nosuch'\)"
    for call in (convert, lambda pt, pd, **kw: compare_forward(pt, pd, IDS, **kw)):
        with pytest.raises(PipelineError, match=said):
            call(TiedTorch(), TiedPaddle(), name_map={"nosuch": "emb"})


# ---------------------------------------------------------------- an embedding both halves share

class HalfTorch(torch.nn.Module):
    def __init__(self, shared):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(99, 32)
        self.embed_tokens.weight = shared.weight  # transformers ties each half's own embedding to `shared`
        self.fc = torch.nn.Linear(32, 32)

    def forward(self, ids, memory=None):
        h = self.fc(self.embed_tokens(ids))
        return h if memory is None else h + memory.mean(1, keepdim=True)


class Seq2SeqTorch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = torch.nn.Embedding(99, 32)
        self.encoder, self.decoder = HalfTorch(self.shared), HalfTorch(self.shared)

    def forward(self, src, tgt):
        return self.decoder(tgt, self.encoder(src))


class HalfPaddle(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(32, 32)

    def forward(self, x, memory=None):
        h = self.fc(x)
        return h if memory is None else h + memory.mean(1, keepdim=True)


class Seq2SeqPaddle(paddle.nn.Layer):
    """paddlenlp's habit: one `shared` embedding, called by both halves."""
    def __init__(self):
        super().__init__()
        self.shared = paddle.nn.Embedding(99, 32)
        self.encoder, self.decoder = HalfPaddle(), HalfPaddle()

    def forward(self, src, tgt):
        return self.decoder(self.shared(tgt), self.encoder(self.shared(src)))


SRC = np.random.RandomState(1).randint(0, 99, (2, 8)).astype(np.int64)
TGT = np.random.RandomState(2).randint(0, 99, (2, 8)).astype(np.int64)


@pytest.mark.parametrize("name_map", [None, {"encoder.embed_tokens": "shared", "decoder.embed_tokens": "shared"}])
def test_an_embedding_both_halves_share_converts_and_trains_green_with_no_map_and_with_one(name_map):
    torch.manual_seed(0)
    pt, pd = Seq2SeqTorch(), Seq2SeqPaddle()
    state = convert(pt, pd, name_map, inputs=(SRC, TGT))
    assert np.array_equal(state["shared.weight"], pt.shared.weight.detach().numpy())
    forward = compare_forward(pt, pd, (SRC, TGT), name_map)
    # Paddle embeds the decoder's tokens first: its first call is torch's decoder.embed_tokens
    assert forward.passed and {"encoder.embed_tokens -> shared#2", "decoder.embed_tokens -> shared"} <= \
        {line.split(" (")[0] for line in forward.pairs().splitlines()}, forward.pairs()
    report = train(pt, pd, (SRC, TGT), np.zeros((2, 8, 32), np.float32), name_map=name_map)
    assert report.passed, report.table()


def test_a_decoder_fed_the_source_tokens_is_red_at_its_embedding():
    torch.manual_seed(0)
    pt, pd = Seq2SeqTorch(), Seq2SeqPaddle()
    convert(pt, pd, inputs=(SRC, TGT))
    pd.forward = lambda src, tgt: pd.decoder(pd.shared(src), pd.encoder(pd.shared(src)))
    report = compare_forward(pt, pd, (SRC, TGT))
    row = next(r for r in report.rows if r.name == "decoder.embed_tokens")
    assert not report.passed and not row.passed and row.input_ok is False, report.table()


# ---------------------------------------------------------------- flattened batches

class FlatFFN(torch.nn.Module):
    """fc1 and fc2 fed [batch * seq, hidden], as some library models do."""
    def __init__(self):
        super().__init__()
        self.emb, self.fc1, self.fc2 = torch.nn.Embedding(50, 16), torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, ids):
        h = self.emb(ids)
        return self.fc2(torch.relu(self.fc1(h.reshape(-1, 16)))).reshape(h.shape)


class BatchFFN(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.emb, self.fc1, self.fc2 = paddle.nn.Embedding(50, 16), paddle.nn.Linear(16, 32), paddle.nn.Linear(32, 16)

    def forward(self, ids):
        return self.fc2(paddle.nn.functional.relu(self.fc1(self.emb(ids))))


def test_a_linear_fed_a_flattened_batch_pairs_and_is_compared_forward_and_backward():
    torch.manual_seed(0)
    pt, pd = FlatFFN(), BatchFFN()
    convert(pt, pd, inputs=IDS)
    report = compare_forward(pt, pd, IDS)
    assert report.passed and {"fc1 -> fc1", "fc2 -> fc2"} <= set(report.pairs().splitlines()), report.pairs()
    fc1 = next(r for r in report.rows if r.name == "fc1")
    assert fc1.max is not None and "the same values in another shape" in fc1.by_design
    assert train(pt, pd, IDS, np.zeros((2, 6, 16), np.float32)).passed


def test_a_bias_left_unloaded_behind_a_flattened_batch_is_red_at_its_module():
    torch.manual_seed(0)
    pt, pd = FlatFFN(), BatchFFN()
    convert(pt, pd, inputs=IDS)
    pd.fc2.bias.set_value(np.zeros(16, np.float32))
    report = compare_forward(pt, pd, IDS)
    assert not report.passed and report.first_diverging == "fc2", report.table()


def test_isolation_feeds_a_flattened_linear_torchs_values_in_its_own_shape():
    """isolate=True forces torch's [batch, seq, hidden] values into the Linear fed [batch * seq, hidden]: the clean
    port green, and a bias left unloaded in fc1 names fc1 alone, not fc2 on fc1's values."""
    torch.manual_seed(0)
    pt, pd = FlatFFN(), BatchFFN()
    convert(pt, pd, inputs=IDS)
    assert compare_forward(pt, pd, IDS, isolate=True).passed
    pd.fc1.bias.set_value(np.zeros(32, np.float32))
    report = compare_forward(pt, pd, IDS, isolate=True)
    assert report.differing == ["fc1"] and report.first_diverging == "fc1", report.table()


# ---------------------------------------------------------------- subclassed embeddings

class TorchPositionalEmbedding(torch.nn.Embedding):
    """A learned position embedding: positions offset by 2, as BART's."""
    def forward(self, ids):
        return super().forward(torch.arange(ids.shape[1]) + 2)


def paddle_position(name):
    class Position(paddle.nn.Embedding):
        offset = 2

        def forward(self, ids):
            return super().forward(paddle.arange(ids.shape[1]) + self.offset)
    Position.__name__ = name
    return Position


class PosTorch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens, self.positions = torch.nn.Embedding(50, 16), TorchPositionalEmbedding(10, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, ids):
        return self.norm(self.tokens(ids) + self.positions(ids))


class GPTLayerNorm(paddle.nn.LayerNorm):
    """paddlenlp's habit: its own subclass of the framework's layer."""


class PosPaddle(paddle.nn.Layer):
    def __init__(self, kind, offset=2):
        super().__init__()
        self.tokens, self.positions = paddle.nn.Embedding(50, 16), kind(10, 16)
        self.positions.offset = offset
        self.norm = GPTLayerNorm(16)

    def forward(self, ids):
        return self.norm(self.tokens(ids) + self.positions(ids))


@pytest.mark.parametrize("name", ["PaddlePositionEmbedding", "TorchPositionalEmbedding"])
def test_subclassed_embeddings_and_norms_pair_as_their_base_layer(name):
    torch.manual_seed(0)
    pt, pd = PosTorch(), PosPaddle(paddle_position(name))
    convert(pt, pd, inputs=IDS)
    report = compare_forward(pt, pd, IDS)
    assert report.passed and "positions -> positions" in report.pairs(), report.table()
    assert convert(pt, pd)  # by definition order too


def test_a_subclassed_embedding_with_the_wrong_offset_is_red_at_its_module():
    torch.manual_seed(0)
    pt, pd = PosTorch(), PosPaddle(paddle_position("PaddlePositionEmbedding"), offset=0)
    convert(pt, pd, inputs=IDS)
    report = compare_forward(pt, pd, IDS)
    assert not report.passed and report.first_diverging == "positions", report.table()


def test_a_layout_declared_for_a_layer_applies_to_its_subclasses():
    """A layout named for paddle's LayerNorm reaches GPTLayerNorm (here 'transpose' on purpose: its 1-D tensors
    fail the shape check, which proves the declared rule was the one applied)."""
    torch.manual_seed(0)
    pt, pd = PosTorch(), PosPaddle(paddle_position("PaddlePositionEmbedding"))
    from portcheck.mapping.convert import plan
    planned = plan(pt, pd, layouts={paddle.nn.LayerNorm: "same"}, inputs=IDS)
    assert planned["norm.weight"][1].rule.__name__ == "same_layout"
    planned = plan(pt, pd, layouts={"LayerNorm": "transpose"}, inputs=IDS)
    assert planned["norm.weight"][1].rule.__name__ == "linear_layout"


# ---------------------------------------------------------------- a config difference

class TypesTorch(torch.nn.Module):
    def __init__(self, types=2):
        super().__init__()
        self.word, self.token_type = torch.nn.Embedding(50, 32), torch.nn.Embedding(types, 32)

    def forward(self, ids):
        return self.word(ids) + self.token_type(torch.zeros_like(ids))


class TypesPaddle(paddle.nn.Layer):
    def __init__(self, types=16):
        super().__init__()
        self.word, self.token_type = paddle.nn.Embedding(50, 32), paddle.nn.Embedding(types, 32)

    def forward(self, ids):
        return self.word(ids) + self.token_type(paddle.zeros_like(ids))


@pytest.mark.parametrize("inputs", [None, IDS])
def test_token_type_embeddings_of_two_configs_are_said_as_a_config_difference(inputs):
    output = "" if inputs is None else r"; output \[2, 6, 32\]"  # with a run, each side's output shape too
    with pytest.raises(PipelineError, match=r"1 torch module\(s\) differ in shape from their Paddle counterpart: "
                                            rf"torch token_type \(weight \[2, 32\]{output}\) against Paddle token_type "
                                            rf"\(weight \[16, 32\]{output}\), num_embeddings 2 against 16: the two "
                                            r"models' configs differ") as e:
        convert(TypesTorch(), TypesPaddle(), inputs=inputs)
    assert "name_map" not in str(e.value).split("configs differ")[0]
    assert convert(TypesTorch(), TypesPaddle(2), inputs=inputs)


# ---------------------------------------------------------------- refusals' maps, pasted as printed

class Residual(torch.nn.Module):
    """transformers' habit: a block holding its layers itself, where Paddle's wraps them in a Sequential."""
    def __init__(self):
        super().__init__()
        self.lin, self.act = torch.nn.Linear(8, 8), torch.nn.ReLU()

    def forward(self, x):
        return x + self.act(self.lin(x))


class BlockPaddle(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Sequential(paddle.nn.Linear(8, 8), paddle.nn.ReLU())

    def forward(self, x):
        return x + self.conv(x)


class BlocksPaddle(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.stem, self.blocks = paddle.nn.Linear(8, 8), paddle.nn.Sequential(*[BlockPaddle() for _ in range(3)])

    def forward(self, x):
        return self.blocks(self.stem(x))


def test_a_tie_of_containers_is_settled_by_the_run_and_refused_with_a_working_map_when_values_cannot():
    """A torch block fits a Paddle block and its inner Sequential equally by structure (and their names share
    nothing: torch's 1 is Paddle's blocks.0): the residual add tells them apart once the weights are the same;
    with other weights the refusal's map, pasted as printed, pairs them."""
    torch.manual_seed(0)
    pt = torch.nn.Sequential(torch.nn.Linear(8, 8), *[Residual() for _ in range(3)])
    pd = BlocksPaddle()
    x = np.random.RandomState(0).randn(2, 8).astype(np.float32)
    convert(pt, pd, inputs=x)
    report = compare_forward(pt, pd, x)
    assert report.passed and {"1 -> blocks.0 (by value)", "3 -> blocks.2 (by value)"} <= \
        set(report.pairs().splitlines()), report.pairs()
    fresh = BlocksPaddle()  # other weights: values cannot settle it
    with pytest.raises(PipelineError, match=r"torch 1 fits Paddle blocks\.0\.conv and blocks\.0 equally \(name_map="
                                            r"\[\('\^1\$', 'blocks\.0\.conv'\)\] or name_map=\[\('\^1\$', "
                                            r"'blocks\.0'\)\]\)") as e:
        compare_forward(pt, fresh, x)
    for name_map in [suggested(str(e.value)), [("^1$", "blocks.0"), ("^2$", "blocks.1"), ("^3$", "blocks.2")]]:
        report = compare_forward(pt, fresh, x, name_map)  # pasted as printed, it pairs (and is red: other weights)
        assert all(f"{t} -> {p} (name map)" in report.pairs().splitlines() for t, p in
                   [(rule[0][1:-1], rule[1]) for rule in name_map]), report.pairs()


# ---------------------------------------------------------------- one module against several (portcheck.Fused)

def gpt2_pair(fused: bool):
    """transformers' GPT2Model and paddlenlp's GPTModel, small, of one config (paddlenlp's GPTLayerNorm subclasses
    LayerNorm; with fused, its attention computes q, k and v in one qkv_proj ordered per head)."""
    from paddlenlp.transformers import GPTConfig, GPTModel
    from transformers import GPT2Config, GPT2Model
    torch.manual_seed(0)
    paddle.seed(0)
    pt = GPT2Model(GPT2Config(vocab_size=99, n_positions=16, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0,
                              embd_pdrop=0, attn_pdrop=0, use_cache=False)).eval()
    pd = GPTModel(GPTConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=128, max_position_embeddings=16, hidden_dropout_prob=0,
                            attention_probs_dropout_prob=0, fuse_attention_qkv=fused, hidden_act="gelu_new"))
    pd.eval()
    return pt, pd


GPT_IDS = np.random.RandomState(3).randint(0, 99, (2, 8)).astype(np.int64)


def hidden_mse(output, target):
    """The mean squared error of the last hidden state (transformers returns a ModelOutput, paddlenlp a tensor)."""
    hidden = output[0] if isinstance(output, (tuple, list)) or hasattr(output, "last_hidden_state") else output
    return ((hidden - target) ** 2).mean()


@pytest.mark.parametrize("fused", [False, True], ids=["split", "fused"])
def test_gpt2_against_paddlenlp_gpt_is_green_forward_and_backward_with_its_recipe_and_no_map(fused):
    from portcheck.mapping.recipes import paddlenlp_gpt
    pt, pd = gpt2_pair(fused)
    layouts = paddlenlp_gpt(heads=4, fused=fused)
    state = convert(pt, pd, inputs=GPT_IDS, layouts=layouts)
    weight = pt.h[0].attn.c_attn.weight.detach().numpy()  # [in, q | k | v]
    if fused:  # per head: head 0's q, k, v columns first
        assert np.array_equal(state["decoder.layers.0.self_attn.qkv_proj.weight"][:, :8], weight[:, :8])
        assert np.array_equal(state["decoder.layers.0.self_attn.qkv_proj.weight"][:, 8:16], weight[:, 32:40])
    else:
        assert np.array_equal(state["decoder.layers.0.self_attn.k_proj.weight"], weight[:, 32:64])
    assert record.model_fingerprint(pt, port=state) == record.model_fingerprint(pd, port=state)  # parts, joined
    report = compare_forward(pt, pd, GPT_IDS, layouts=layouts, isolate=True)
    assert report.passed, report.table()
    parts = {"h.0.attn.c_attn.q", "h.0.attn.c_attn.k", "h.0.attn.c_attn.v"}
    assert parts <= {r.name for r in report.paired} and parts <= {r.name for r in report.isolated}, report.table()
    target = np.zeros((2, 8, 32), np.float32)
    trained = compare_backward(pt, pd, GPT_IDS, target, (hidden_mse, hidden_mse),
                               (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(
                                   learning_rate=0.1, parameters=ps)), steps=2, layouts=layouts)
    assert trained.passed, trained.table()
    assert {"grad h.0.attn.c_attn.q.weight", "grad h.0.attn.c_attn.v.bias"} <= {r.name for r in trained.grads}


def test_a_softmax_scale_planted_in_gpt_attention_is_named_at_the_attention_not_its_block():
    """transformers' GPT2Attention runs its resid_dropout inside, paddlenlp's MultiHeadAttention leaves its dropout1
    to the layer, run after it: the run's order paired the dropouts and left both attentions unpaired (the scores
    scaled wrongly named at h.0, the block; isolated at h.0 before h.0.attn.c_proj). Paired by the modules holding
    tensors inside them (mapping.ties.containers), the attention is the place in both verdicts."""
    from portcheck.mapping.recipes import paddlenlp_gpt
    pt, pd = gpt2_pair(False)
    layouts = paddlenlp_gpt(heads=4, fused=False)
    convert(pt, pd, inputs=GPT_IDS, layouts=layouts)
    clean = compare_forward(pt, pd, GPT_IDS, layouts=layouts)
    assert clean.passed and clean.pairing.modules()["h.0.attn"] == "decoder.layers.0.self_attn", clean.pairs()
    attn = pd.decoder.layers[0].self_attn
    scores = attn._core_attention
    attn._core_attention = lambda q, k, v, **kw: scores(q * 0.5, k, v, **kw)  # scores halved before the softmax
    report = compare_forward(pt, pd, GPT_IDS, layouts=layouts, isolate=True)
    assert not report.passed and report.first_diverging == "h.0.attn[0]", report.table()
    assert [d.both.split(" (Paddle")[0] for d in report.differing] == ["h.0.attn (before h.0.attn.c_proj)"]


def test_the_pages_gpt_blocks_run_alone_and_print_what_the_page_says(tmp_path):
    """docs/pairing.md's programs, the clean pair and the planted one, each alone in an empty folder with fresh
    globals, in this process (which imports transformers and paddlenlp already; tests/test_docs_blocks.py)."""
    from test_docs_blocks import DOCS, printed_as_said, python_blocks, run_in_process
    page = python_blocks(DOCS / "pairing.md")
    assert len(page) == 2
    for (code, said), (status, output) in zip(page, run_in_process([code for code, _ in page], tmp_path)):
        assert status == 0 and not printed_as_said(output, said), output[-3000:]


def test_a_fused_qkv_in_the_wrong_column_order_is_red_at_its_module():
    """Paddle's qkv_proj holding [q | k | v] where its forward reads per head: red at the fused projection; with
    isolate=True each part computes on torch's input and its output, forced to torch's, goes on whole (in Paddle's
    column order): the parts alone differ, not the attention after them."""
    from portcheck.mapping.recipes import paddlenlp_gpt
    pt, pd = gpt2_pair(fused=True)
    layouts = paddlenlp_gpt(heads=4, fused=True)
    convert(pt, pd, inputs=GPT_IDS, layouts=layouts)
    for i, block in enumerate(pt.h):  # the weights as they come, without the per-head order
        qkv = pd.decoder.layers[i].self_attn.qkv_proj
        qkv.weight.set_value(block.attn.c_attn.weight.detach().numpy())
        qkv.bias.set_value(block.attn.c_attn.bias.detach().numpy())
    report = compare_forward(pt, pd, GPT_IDS, layouts=layouts, isolate=True)
    assert not report.passed and report.first_diverging == "h.0.attn.c_attn.q", report.table()
    assert report.differing == [f"h.{i}.attn.c_attn.{p}" for i in range(2) for p in "qkv"], report.table()


class GatedTorch(torch.nn.Module):
    """A gated feed-forward with separate gate and up projections (transformers' Llama)."""
    def __init__(self):
        super().__init__()
        self.gate_proj, self.up_proj = torch.nn.Linear(16, 24, bias=False), torch.nn.Linear(16, 24, bias=False)
        self.down_proj = torch.nn.Linear(24, 16, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class GatedPaddle(paddle.nn.Layer):
    """The same with gate and up in one Linear, [gate | up] (paddlenlp's fuse_attention_ffn)."""
    def __init__(self, swap=False):
        super().__init__()
        self.gate_up_fused_proj = paddle.nn.Linear(16, 48, bias_attr=False)
        self.down_proj = paddle.nn.Linear(24, 16, bias_attr=False)
        self.swap = swap

    def forward(self, x):
        gate, up = paddle.chunk(self.gate_up_fused_proj(x), 2, axis=-1)
        if self.swap:  # the planted bug: the halves read the other way round
            gate, up = up, gate
        return self.down_proj(paddle.nn.functional.silu(gate) * up)


@pytest.mark.parametrize("swap", [False, True], ids=["correct", "halves swapped"])
def test_separate_gate_and_up_against_one_fused_linear(swap):
    torch.manual_seed(0)
    pt, pd = GatedTorch(), GatedPaddle(swap)
    x = np.random.RandomState(0).randn(2, 5, 16).astype(np.float32)
    layouts = {"gate_up_fused_proj": Fused(("gate", "up"))}
    state = convert(pt, pd, inputs=x, layouts=layouts)
    assert np.array_equal(state["gate_up_fused_proj.weight"][:, 24:], pt.up_proj.weight.detach().numpy().T)
    report = compare_forward(pt, pd, x, layouts=layouts)
    assert {"gate_proj -> gate_up_fused_proj.gate", "up_proj -> gate_up_fused_proj.up"} <= \
        set(report.pairs().splitlines()), report.pairs()
    trained = train(pt, pd, x, np.zeros((2, 5, 16), np.float32), layouts=layouts)
    if not swap:
        assert report.passed and trained.passed, report.table() + trained.table()
    else:  # each part computes what torch's does: the run parts after them, where they are read
        assert not report.passed and report.first_diverging in ("(model) (before down_proj)", "(model)"), report.table()
        assert not trained.passed


# ---------------------------------------------------------------- MobileNetV2: ties settled by the run

def mobilenet_pair(epsilon=None):
    """transformers' MobileNetV2ForImageClassification from a config (symmetric padding, as Paddle's) and
    paddle.vision's mobilenet_v2; epsilon: Paddle's BatchNorm epsilon set to it (transformers' is 1e-3)."""
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification
    torch.manual_seed(0)
    paddle.seed(0)
    pt = MobileNetV2ForImageClassification(MobileNetV2Config(num_labels=10, image_size=32, tf_padding=False,
                                                                     depth_multiplier=0.5)).eval()
    pd = paddle.vision.models.mobilenet_v2(scale=0.5, num_classes=10)
    pd.eval()
    for layer in pd.sublayers():
        if isinstance(layer, paddle.nn.BatchNorm2D) and epsilon is not None:
            layer._epsilon = epsilon
    return pt, pd


IMAGE = np.random.RandomState(4).randn(1, 3, 32, 32).astype(np.float32)


def test_mobilenet_v2_against_paddle_vision_is_green_with_no_map():
    """HF's MobileNetV2InvertedResidual fits Paddle's InvertedResidual and its inner Sequential equally by shapes;
    their class names' stem settles it (and where it cannot, the run's values: the residual add)."""
    pt, pd = mobilenet_pair(epsilon=1e-3)
    convert(pt, pd, inputs=IMAGE)
    report = compare_forward(pt, pd, IMAGE)
    assert report.passed, report.table()
    assert {"mobilenet_v2.layer.1 -> features.3", "mobilenet_v2.layer.1.reduce_1x1.convolution -> features.3.conv.2"} \
        <= set(report.pairs().splitlines()), report.pairs()


def test_mobilenet_v2_with_paddles_default_batchnorm_epsilon_is_red_at_the_first_batchnorm():
    pt, pd = mobilenet_pair()
    convert(pt, pd, inputs=IMAGE)
    report = compare_forward(pt, pd, IMAGE)
    assert not report.passed and report.first_diverging == "mobilenet_v2.conv_stem.first_conv.normalization", \
        report.table()


def suggested_layouts(error: str) -> dict:
    """The layouts a refusal suggests, as printed (evaluated as a user's script would, portcheck imported)."""
    import portcheck
    return eval(re.search(r"(?:together|other): (?:if its columns hold them one after the other, )?layouts=(\{.*?\}) "
                          r"\(heads=", error).group(1), {"portcheck": portcheck})


def test_a_fused_module_without_its_layout_is_taken_or_refused_with_the_layout_that_pairs_it():
    """GPT-2's c_attn with no Fused entry: its c_proj fits each of q_proj, k_proj, v_proj and out_proj, ties c_attn
    settles: convert takes the Fused entry the refusal named, said; and the other way round (Paddle's fused gate
    and up against torch's two, no tie): settled by the run given inputs, refused without them naming the entry,
    which pasted as printed pairs it."""
    pt, pd = gpt2_pair(fused=False)
    state = convert(pt, pd, inputs=GPT_IDS)
    assert state.fused_found == {"c_attn": Fused(("q_proj", "k_proj", "v_proj"))}
    assert "c_attn as portcheck.Fused(('q_proj', 'k_proj', 'v_proj'))" in state.said
    assert compare_forward(pt, pd, GPT_IDS, layouts=state.fused_found).passed
    torch.manual_seed(0)
    pt, pd = GatedTorch(), GatedPaddle()
    x = np.random.RandomState(0).randn(2, 5, 16).astype(np.float32)
    state = convert(pt, pd, inputs=x)  # settled by the run: its columns [gate | up]
    assert state.fused_found == {"gate_up_fused_proj": Fused(("gate_proj", "up_proj"))}, state.said
    with pytest.raises(PipelineError, match=r"gate_proj \(Linear\); up_proj \(Linear\)") as e:
        convert(pt, pd)  # no run to settle it: the refusal names the entry
    layouts = suggested_layouts(str(e.value))
    assert layouts == {"gate_up_fused_proj": Fused(("gate_proj", "up_proj"))}
    convert(pt, pd, inputs=x, layouts=layouts)
    assert compare_forward(pt, pd, x, layouts=layouts).passed


def test_compare_forward_with_no_layouts_judges_each_part_of_the_fused_module_the_ties_show():
    """compare_forward alone (no layouts=, the models holding the same weights): its run's values settle c_proj's tie
    with out_proj, which left c_attn paired with nothing and unjudged; the ties still show c_attn holds q_proj,
    k_proj and v_proj: taken as that Fused entry, said in one line, each part judged. A conversion splitting c_attn
    [k | q | v] (q and k swapped) is red at the part, not only at c_proj after the attention. Two saved records,
    no model at hand to cut c_attn, say it in one line with the layouts= that compare_forward judges each part by."""
    import portcheck
    from portcheck import judge_forward, record_forward
    pt, pd = gpt2_pair(fused=False)
    pd.set_state_dict(convert(pt, pd, inputs=GPT_IDS))
    report = compare_forward(pt, pd, GPT_IDS)
    assert report.passed and report.fused_found == {"c_attn": Fused(("q_proj", "k_proj", "v_proj"))}, report.table()
    assert "h.0.attn.c_attn.q_proj" in [r.name for r in report.paired] and any(
        "c_attn as portcheck.Fused(('q_proj', 'k_proj', 'v_proj'))" in line for line in report.outputs_said)
    with pytest.raises(PipelineError, match=r"\[PC450\]") as e:  # an entry of that name that does not pair it
        compare_forward(pt, pd, GPT_IDS, layouts={"c_attn": "same"})
    assert compare_forward(pt, pd, GPT_IDS, layouts=suggested_layouts(str(e.value))).passed  # pasted as printed
    saved = judge_forward(record_forward(pt, GPT_IDS), record_forward(pd, GPT_IDS))  # no model to cut it: said
    said = [line for line in saved.outputs_said if "[PC451]" in line]
    assert said and "c_attn pairs with nothing" in said[0], saved.table()
    layouts = eval(re.search(r"layouts=(\{.*?\}) judges", said[0]).group(1), {"portcheck": portcheck})
    pasted = compare_forward(pt, pd, GPT_IDS, layouts=layouts)
    assert pasted.passed and pasted.fused_found == {} and "h.0.attn.c_attn.k_proj" in pasted.pairing.pairs
    attention = pd.decoder.layers[0].self_attn
    q, k = attention.q_proj.weight.numpy(), attention.k_proj.weight.numpy()
    attention.q_proj.weight.set_value(k)
    attention.k_proj.weight.set_value(q)
    report = compare_forward(pt, pd, GPT_IDS)
    assert not report.passed and report.first_diverging == "h.0.attn.c_attn.q_proj", report.table()


# ---------------------------------------------------------------- one torch module run as several Paddle ones

class TwiceTorch(torch.nn.Module):
    """One Linear applied twice: one weight shared between its calls."""
    def __init__(self):
        super().__init__()
        self.inp, self.lin = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(torch.tanh(self.lin(self.inp(x))))


class TwicePaddle(paddle.nn.Layer):
    """The port: one Linear per call (the shared weight untied)."""
    def __init__(self):
        super().__init__()
        self.inp, self.lin1, self.lin2 = paddle.nn.Linear(8, 8), paddle.nn.Linear(8, 8), paddle.nn.Linear(8, 8)

    def forward(self, x):
        return self.lin2(paddle.tanh(self.lin1(self.inp(x))))


def test_a_module_run_as_several_paddle_modules_is_refused_with_the_entry_that_settles_it():
    """Refused, naming the name_map entry; pasted as printed, convert fills each Paddle module with the shared
    weight (green forward) and compare_backward judges it against the first: red, the port trains them apart."""
    torch.manual_seed(0)
    pt, pd = TwiceTorch(), TwicePaddle()
    x = np.random.RandomState(0).randn(2, 8).astype(np.float32)
    with pytest.raises(PipelineError, match=r"torch lin runs as 2 Paddle modules \(lin1, lin2\): .*"
                                            r"name_map=\{'lin': 'lin1'\} \[PC316\]$") as e:
        convert(pt, pd, inputs=x)
    name_map = ast.literal_eval(re.search(r"name_map=(\{.*\}) \[PC316\]$", str(e.value)).group(1))
    state = convert(pt, pd, name_map, inputs=x)
    assert np.array_equal(state["lin2.weight"], pt.lin.weight.detach().numpy().T)
    report = compare_forward(pt, pd, x, name_map)
    assert report.passed and "lin -> lin1 (name map)" in report.pairs().splitlines(), report.table()
    trained = train(pt, pd, x, np.zeros((2, 8), np.float32), name_map=name_map)
    assert not trained.passed and [r.name for r in trained.grads if not r.passed][:1] == ["grad lin.weight"], \
        trained.table()


# ---------------------------------------------------------------- two leaves only the run's values tell apart

class QueryKeyTorch(torch.nn.Module):
    """transformers' names, query then key; symmetric: q + k, which computes the same with the two swapped."""
    def __init__(self, symmetric=False):
        super().__init__()
        self.symmetric = symmetric
        self.query, self.key = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        q, k = self.query(x), self.key(x)
        return q + k if self.symmetric else torch.softmax(q @ k.transpose(-1, -2), -1) @ x + q


class KeyQueryPaddle(paddle.nn.Layer):
    """The port's names, defined and run key first: the order pairs query with k_proj. axis: the softmax's (-2: a
    port bug in what reads them)."""
    def __init__(self, symmetric=False, axis=-1):
        super().__init__()
        self.symmetric, self.axis = symmetric, axis
        self.k_proj, self.q_proj = paddle.nn.Linear(8, 8), paddle.nn.Linear(8, 8)

    def forward(self, x):
        k = self.k_proj(x)
        q = self.q_proj(x)
        if self.symmetric:
            return q + k
        return paddle.nn.functional.softmax(q @ k.transpose([0, 2, 1]), self.axis) @ x + q


SEQ = np.random.RandomState(5).randn(2, 5, 8).astype(np.float32)


def query_key(symmetric=False, axis=-1):
    torch.manual_seed(0)
    paddle.seed(0)
    return QueryKeyTorch(symmetric), KeyQueryPaddle(symmetric, axis)


def test_two_linears_the_port_runs_in_the_other_order_are_told_apart_by_the_run_with_no_map():
    """Same shapes, names that share nothing, the other order: convert(inputs=) tries both orders on the converted
    rest and keeps the one whose run is torch's; compare_forward and compare_backward pair them by their values.
    Without a run the order pairs them (query with k_proj): that conversion is red, never green."""
    pt, pd = query_key()
    convert(pt, pd)  # definition order: query's weights in k_proj
    assert not compare_forward(pt, pd, SEQ).passed
    state = convert(pt, pd, inputs=SEQ)
    assert np.array_equal(state["q_proj.weight"], pt.query.weight.detach().numpy().T)
    assert state.origin["k_proj.bias"] == "key.bias"
    report = compare_forward(pt, pd, SEQ)
    assert report.passed and {"query -> q_proj (by value)", "key -> k_proj (by value)"} <= \
        set(report.pairs().splitlines()), report.pairs()
    trained = train(pt, pd, SEQ, np.zeros((2, 5, 8), np.float32))
    assert trained.passed, trained.table()


def test_a_port_bug_after_two_linears_no_order_mends_converts_in_the_runs_order_and_is_red():
    """A port bug in what reads them (the softmax over the other axis): no order gives torch's values, so no value
    says which; the run's order stays (no refusal hiding the bug) and the comparison is red."""
    pt, pd = query_key(False, -2)
    pd.set_state_dict(convert(pt, pd, inputs=SEQ))
    report = compare_forward(pt, pd, SEQ)
    assert not report.passed and report.first_diverging == "(model)", report.table()


def test_two_linears_computing_the_same_either_way_keep_the_runs_order():
    """q + k: the run's order gives torch's values (so would the other: nothing depends on which), kept after one
    run, green forward and backward."""
    pt, pd = query_key(True, -1)
    pd.set_state_dict(convert(pt, pd, inputs=SEQ))
    assert compare_forward(pt, pd, SEQ).passed
    assert train(pt, pd, SEQ, np.zeros((2, 5, 8), np.float32)).passed


class FiveTorch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c, self.d, self.e = [torch.nn.Linear(4, 4) for _ in range(5)]

    def forward(self, x):
        return self.a(x) + 2 * self.b(x) + 3 * self.c(x) + 4 * self.d(x) + 5 * self.e(x)


class FivePaddle(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.p1, self.p2, self.p3, self.p4, self.p5 = [paddle.nn.Linear(4, 4) for _ in range(5)]

    def forward(self, x):  # the same sum, run the other way round
        e, d, c, b, a = self.p5(x), self.p4(x), self.p3(x), self.p2(x), self.p1(x)
        return a + 2 * b + 3 * c + 4 * d + 5 * e


def five():
    torch.manual_seed(0)
    pt, pd = FiveTorch(), FivePaddle()
    x = np.random.RandomState(0).randn(2, 4).astype(np.float32)
    return (lambda: convert(pt, pd, inputs=x),
            lambda m, run: convert(pt, pd, m, inputs=x) and compare_forward(pt, pd, x, m))


def test_more_orders_than_convert_tries_are_refused_naming_the_map():
    """Five Linears of one shape whose names say nothing, run in the other order: 120 orders, more than the 24
    convert runs; refused."""
    with pytest.raises(PipelineError, match=r"^torch a, b, c, d, e fit Paddle p5, p4, p3, p2, p1 in any order, more "
                                            r"than the 24 orders convert tries: give the name_map that says which "
                                            r"\(name_map=\{'a': 'p5', 'b': 'p4', 'c': 'p3', 'd': 'p2', 'e': 'p1'\} "
                                            r"takes the run's order\) \[PC303\]$"):
        five()[0]()


def pasted(error: str) -> tuple:
    """([each name_map a refusal suggests for all it refuses, as printed], whether it says to give inputs= with it):
    each tie's own where it names one, else the one taking each one's first candidate; with no run, none but
    inputs= ([None], True)."""
    if "give inputs= to pair them" in error:
        return [None], True
    maps = [ast.literal_eval(m) for m in re.findall(r"name_map=(\{.*?\}|\[.*?\])", error)]
    if error.count(" equally (") > 1:
        maps = [suggested(error)]
    return maps, bool(re.search(r"inputs= with|give inputs= and", error))


def mapped(name_map) -> list:
    """(torch module, Paddle module) of each entry of a suggested map (a dict, or rules naming one module each)."""
    return list(name_map.items()) if isinstance(name_map, dict) else [(re.sub(r"\\(.)", r"\1", t[1:-1]), p)
                                                                      for t, p in name_map or ()]


X8 = np.random.RandomState(0).randn(2, 8).astype(np.float32)


def twice(inputs):
    torch.manual_seed(0)
    pt, pd = TwiceTorch(), TwicePaddle()
    return (lambda: convert(pt, pd, inputs=X8 if inputs else None),
            lambda m, run: convert(pt, pd, m, inputs=X8 if run or inputs else None) and compare_forward(pt, pd, X8, m))


def blocks():
    torch.manual_seed(0)
    pt = torch.nn.Sequential(torch.nn.Linear(8, 8), *[Residual() for _ in range(3)])
    pd = BlocksPaddle()
    return lambda: compare_forward(pt, pd, X8), lambda m, run: compare_forward(pt, pd, X8, m)


def one_against_two():
    from test_pairing import TwoLinear
    from portcheck import judge_forward, record_forward
    torch.manual_seed(0)
    x = np.ones((2, 4), np.float32)
    t, p = record_forward(torch.nn.Sequential(torch.nn.Linear(4, 4)), x), record_forward(TwoLinear(), x)
    return lambda: judge_forward(t, p), lambda m, run: judge_forward(t, p, m)


def resnet18():
    """Without a run, definition order cannot tell bn2 from downsample.1 (transformers defines the shortcut first)."""
    from examples.resnet18 import resnet
    pt = resnet.new_torch_model().eval()
    pd = paddle.vision.models.resnet18(num_classes=resnet.CLASSES).eval()
    x = resnet.batch()[0]
    return (lambda: convert(pt, pd),
            lambda m, run: convert(pt, pd, m, inputs=x if run else None) and compare_forward(pt, pd, x, m))


# (what is refused: a call making the refusal, and one judging the pair with a name_map, with inputs= or not)
REFUSALS = {"a module run twice, no run": lambda: twice(False), "a module run twice, a run": lambda: twice(True),
            "a block and its inner Sequential, other weights": blocks, "one linear against two": one_against_two,
            "five linears of one shape": five,
            "ResNet-18 with no run": resnet18}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_every_refusals_suggested_map_pasted_as_printed_pairs_the_models(case):
    """Each name_map a refusal prints, pasted as printed (with inputs= where it says so), pairs the models: no
    refusal, and every entry is a pair of the report, named by the map."""
    refused, judged = REFUSALS[case]()
    with pytest.raises(PipelineError) as e:
        refused()
    maps, run = pasted(str(e.value))
    assert maps, str(e.value)
    for name_map in maps:
        report = judged(name_map, run)
        assert all(f"{t} -> {p} (name map)" in report.pairs().splitlines() for t, p in mapped(name_map)), \
            (str(e.value), name_map, report.pairs())


def test_leaves_whose_names_say_nothing_run_in_the_same_order_convert_after_one_run():
    """Five Linears of one shape, names that share nothing, run in torch's order: kept as the run pairs them after
    one Paddle run (no order tried in turn), green."""
    class SameOrder(FivePaddle):
        def forward(self, x):
            return self.p1(x) + 2 * self.p2(x) + 3 * self.p3(x) + 4 * self.p4(x) + 5 * self.p5(x)
    torch.manual_seed(0)
    pt, pd = FiveTorch(), SameOrder()
    x = np.random.RandomState(0).randn(2, 4).astype(np.float32)
    runs = []
    real = paddle.nn.Layer.__call__
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(paddle.nn.Layer, "__call__", lambda self, *a, **k: (runs.append(self) if self is pd else None,
                                                                        real(self, *a, **k))[1])
        pd.set_state_dict(convert(pt, pd, inputs=x))
    assert compare_forward(pt, pd, x).passed and len(runs) <= 3, len(runs)


# ---------------------------------------------------------------- torch's packed in_proj (Fused(output=False))

def encoder_pair(**paddle_kw):
    """torch's nn.TransformerEncoder (its attention's q, k, v packed in in_proj_weight [3E, E]) and Paddle's (q_proj,
    k_proj, v_proj Linears), of one config."""
    torch.manual_seed(0)
    paddle.seed(0)
    pt = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True), 2,
                                     enable_nested_tensor=False)
    pd = paddle.nn.TransformerEncoder(paddle.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, **paddle_kw), 2)
    return pt, pd


STATES = np.random.RandomState(5).randn(2, 6, 16).astype(np.float32)


def test_torchs_packed_in_proj_converts_to_paddles_q_k_v_and_is_green_forward_and_backward():
    from portcheck.mapping.recipes import TORCH_ATTENTION
    pt, pd = encoder_pair()
    state = convert(pt, pd, inputs=STATES, layouts=TORCH_ATTENTION)
    packed = pt.layers[1].self_attn.in_proj_weight.detach().numpy()  # [q; k; v], each [out, in]
    assert np.array_equal(state["layers.1.self_attn.k_proj.weight"], packed[16:32].T)
    assert np.array_equal(state["layers.1.self_attn.v_proj.bias"], pt.layers[1].self_attn.in_proj_bias.detach()[32:])
    # each side's own weights fingerprinted under torch's names, the parts in Paddle's layout: equal until one moves
    assert record.model_fingerprint(pt, port=state) == record.model_fingerprint(pd, port=state)
    moved, kept = pd.layers[0].self_attn.v_proj.bias, pd.layers[0].self_attn.v_proj.bias.numpy()
    moved.set_value(kept + 1e-3)
    assert record.model_fingerprint(pt, port=state) != record.model_fingerprint(pd, port=state)
    moved.set_value(kept)
    report = compare_forward(pt.eval(), pd.eval(), STATES, layouts=TORCH_ATTENTION, isolate=True)
    assert report.passed and "layers.1.self_attn[0]" in {r.name for r in report.isolated}, report.table()
    trained = train(pt.train(), pd.train(), STATES, np.zeros_like(STATES), layouts=TORCH_ATTENTION)
    assert trained.passed, trained.table()
    assert {f"grad layers.0.self_attn.{p}.in_proj_{t}" for p in ("q_proj", "k_proj", "v_proj")
            for t in ("weight", "bias")} <= {r.name for r in trained.grads}


def test_a_packed_in_proj_declared_in_the_wrong_order_is_red_at_the_attention():
    """k and q swapped in the layout: convert fills Paddle's k_proj with torch's q rows (the shapes fit), and the
    comparison is red at the first attention, forward and backward: a mis-stated layout is never accepted."""
    layouts = {"MultiheadAttention": Fused(("k_proj", "q_proj", "v_proj"), output=False)}
    pt, pd = encoder_pair()
    convert(pt, pd, inputs=STATES, layouts=layouts)
    report = compare_forward(pt.eval(), pd.eval(), STATES, layouts=layouts)
    assert not report.passed and report.first_diverging.startswith("layers.0.self_attn"), report.table()
    trained = train(pt.train(), pd.train(), STATES, np.zeros_like(STATES), layouts=layouts)
    assert not trained.passed and trained.first_diverging.startswith("layers.0.self_attn"), trained.table()


def test_a_packed_in_proj_declared_with_another_part_count_is_refused_in_one_line():
    pt, pd = encoder_pair()
    with pytest.raises(PipelineError, match=r"torch layers\.0\.self_attn's q_proj, k_proj, v_proj, o \(its Fused "
                       r"declares 4 parts: \[12, 16\], \[12\] each; Paddle layers\.0\.self_attn\.q_proj: weight "
                       r"\[16, 16\], bias \[16\]\): declare as many parts as its tensors hold") as e:
        convert(pt, pd, inputs=STATES, layouts={"MultiheadAttention": Fused(("q_proj", "k_proj", "v_proj", "o"),
                                                                          output=False)})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("given", [None, {"MultiheadAttention": Fused(("q_proj", "k_proj", "v_proj"))}],
                         ids=["no layout", "output left True"])
def test_a_packed_in_proj_without_its_layout_is_refused_with_the_layout_that_pairs_it(given):
    """With no entry, or one declaring its output its parts' columns (the attention's output is a third as wide):
    refused, naming output=False, which pasted as printed pairs it."""
    pt, pd = encoder_pair()
    with pytest.raises(PipelineError, match=r"layouts=\{'self_attn': portcheck\.Fused\(\('q_proj', 'k_proj', "
                       r"'v_proj'\), output=False\)\}") as e:
        convert(pt, pd, inputs=STATES, layouts=given)
    layouts = suggested_layouts(str(e.value))
    convert(pt, pd, inputs=STATES, layouts=layouts)
    assert compare_forward(pt.eval(), pd.eval(), STATES, layouts=layouts).passed


def norm_moved(eps=1e-5):
    """torch's embeddings end in their LayerNorm; the port's embeddings return the sum, its encoder normalizes it
    first (paddlenlp's BigBird: encoder.norm), each side's layers alike. eps: the port's norm's (a plant: 1e-3)."""
    class Embeddings(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.words, self.LayerNorm = torch.nn.Embedding(50, 16), torch.nn.LayerNorm(16)

        def forward(self, ids):
            return self.LayerNorm(self.words(ids))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings, self.encoder = Embeddings(), torch.nn.Sequential(torch.nn.Linear(16, 16))

        def forward(self, ids):
            return self.encoder(self.embeddings(ids))

    class PortEmbeddings(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.words = paddle.nn.Embedding(50, 16)

        def forward(self, ids):
            return self.words(ids)

    class Encoder(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm = paddle.nn.LayerNorm(16, epsilon=eps)
            self.layers = paddle.nn.LayerList([paddle.nn.Linear(16, 16)])

        def forward(self, h):
            return self.layers[0](self.norm(h))

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embeddings, self.encoder = PortEmbeddings(), Encoder()

        def forward(self, ids):
            return self.encoder(self.embeddings(ids))
    torch.manual_seed(0)
    paddle.seed(0)
    return Model(), Port()


def test_a_norm_the_port_applies_at_its_encoders_start_pairs_with_the_embeddings_own_with_no_map():
    """Before: PC315 (embeddings.LayerNorm has no counterpart): the pairing refused the norm outside the port's
    embeddings, as it refuses a pre-norm port's layers.1.norm1 for torch's layers.0.norm2, though the port's
    embeddings hold no norm it could be. A plant, the port's epsilon, red at that norm."""
    pt, pd = norm_moved()
    pd.set_state_dict(convert(pt, pd, inputs=IDS))
    report = compare_forward(pt.eval(), pd.eval(), IDS, isolate=True)
    assert report.passed and "embeddings.LayerNorm -> encoder.norm" in report.pairs(), report.table()
    pt, pd = norm_moved(eps=1e-3)
    pd.set_state_dict(convert(pt, pd, inputs=IDS))
    report = compare_forward(pt.eval(), pd.eval(), IDS)
    assert not report.passed and report.first_diverging == "embeddings.LayerNorm", report.table()
