"""Verdicts on code users write (issue 73): pairs and data as a user hands them to the library, each correct one
green and a planted bug in it red.

T5 (transformers / paddlenlp): its position bias is returned with the causal mask added, filled with
finfo(float32).min by transformers and -1e4 by paddlenlp; ALBERT: paddlenlp saves a position_ids buffer
transformers' embeddings hold unsaved; data: -0.0 on one side and 0.0 on the other, torch tensors on one side and
Paddle tensors on the other; a weight torch shares between calls of a block, the map the refusal suggests pasted."""
import ast
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")

from portcheck import compare_forward, convert  # noqa: E402 (after the skips)
from portcheck.core.errors import PipelineError  # noqa: E402
from portcheck.forward.judging import judge_one  # noqa: E402


# ---------------------------------------------------------------- T5: a mask filled otherwise on each side

T5_SIZES = dict(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                relative_attention_num_buckets=8, dropout_rate=0.0, feed_forward_proj="relu", use_cache=False)


@pytest.fixture(scope="module")
def t5():
    from paddlenlp.transformers import T5Config as PaddleConfig, T5Model as PaddleT5
    from transformers import T5Config, T5Model
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = T5Model(T5Config(**T5_SIZES)), PaddleT5(PaddleConfig(**T5_SIZES))
    rng = np.random.RandomState(0)
    x = {"input_ids": rng.randint(1, 100, (2, 12)).astype("int64"),
         "attention_mask": np.array([[1] * 12, [1] * 9 + [0] * 3], "int64"),
         "decoder_input_ids": rng.randint(1, 100, (2, 7)).astype("int64")}
    pd.set_state_dict(convert(pt, pd, inputs=x))
    return pt.eval(), pd.eval(), x


def test_t5_is_green_with_no_map_cumulative_and_isolated(t5):
    """Its decoder's position bias (SelfAttention's third output) holds the causal mask: -3.4e38 on torch's side,
    -1e4 on Paddle's, at the same positions. Since the float64 twin keeps torch's own float32 mask (wide_casts),
    the two were compared as values: red at decoder.block.0.layer.0.SelfAttention, 3.4e38 apart."""
    pt, pd, x = t5
    report = compare_forward(pt, pd, x, isolate=True)
    assert report.passed, report.table()
    said = [line for line in report.table().splitlines() if "decoder.block.0.layer.0.SelfAttention[2]" in line]
    assert said and all("by design: a mask filled with -3.4e+38 on torch's side and -1e+04 on Paddle's" in line
                        for line in said), said


def test_t5_relative_position_bias_planted_is_red_at_it(t5):
    pt, pd, x = t5
    w = pd.decoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight
    before = w.numpy()
    w.set_value(before + 1e-3)
    try:
        report = compare_forward(pt, pd, x)
    finally:
        w.set_value(before)
    assert not report.passed
    assert report.first_diverging == "decoder.block.0.layer.0.SelfAttention.relative_attention_bias", report.table()


def _bias_and_mask(fill, shift=0, seed=0):
    bias = np.random.RandomState(seed).randn(2, 4, 7, 7).astype("float32")
    masked = np.triu(np.ones((7, 7), bool), 1 + shift)
    return np.where(masked, np.float32(fill) + bias, bias).astype("float32"), bias


def test_a_mask_filled_otherwise_is_compared_elsewhere_and_its_floor_is_the_values_not_the_fill():
    """The same positions masked: green, said by design; masked elsewhere (a causal mask one position off): red;
    the unmasked values held to their own rounding, not a floor scaled by 3.4e38 (before, 6.5e32 allowed)."""
    torch_side, _ = _bias_and_mask(np.finfo(np.float32).min)
    row = judge_one("bias", torch_side, torch_side.astype(np.float64), _bias_and_mask(-1e4)[0])
    assert row.passed and row.by_design.startswith("by design: a mask filled with -3.4e+38"), row
    assert row.allowed < 1e-4, row.allowed
    shifted = judge_one("bias", torch_side, torch_side.astype(np.float64), _bias_and_mask(-1e4, shift=1)[0])
    assert not shifted.passed and not shifted.by_design, shifted
    paddle_side = _bias_and_mask(-1e4)[0]
    paddle_side[0, 0, 0, 0] += 1e-3  # one unmasked value off
    planted = judge_one("bias", torch_side, torch_side.astype(np.float64), paddle_side)
    assert not planted.passed, planted


# ---------------------------------------------------------------- ALBERT: a buffer torch holds unsaved

def _albert():
    from tools.zoo.checks import models
    torch.manual_seed(0)
    paddle.seed(0)
    return models.albert({})


def test_albert_converts_with_no_map_and_no_keep_and_is_green():
    """paddlenlp's embeddings save position_ids, transformers' hold it unsaved in the module of the same place; the
    Paddle embeddings hold no weight of their own, so their pair was not known and keep= was asked for."""
    pt, pd, x, _ = _albert()
    pd.set_state_dict(convert(pt, pd, inputs=x))
    report = compare_forward(pt.eval(), pd.eval(), x, isolate=True)
    assert report.passed, report.table()


def test_albert_position_ids_planted_off_by_one_is_refused_naming_the_buffer():
    pt, pd, x, _ = _albert()
    pd.embeddings.position_ids.set_value(pd.embeddings.position_ids.numpy() + 1)
    with pytest.raises(PipelineError, match=r"Paddle buffer embeddings\.position_ids \[1, 64\] int64 differs from "
                                            r"torch's unsaved buffer embeddings\.position_ids .*\[PC014\]"):
        convert(pt, pd, inputs=x)


# ---------------------------------------------------------------- data: -0.0 and 0.0, torch and Paddle tensors

def _log(batches):
    from portcheck.pipeline.training import TrainingLog
    log = TrainingLog()
    for i, batch in enumerate(batches):
        log.step(1.0 / (i + 1), 0.1, batch=batch)
    log.evaluate({"accuracy": 0.5})
    return log.arrays()


def _data_order(t, p):
    from portcheck.pipeline.training import judge_training
    return next(r for r in judge_training(_log(t), _log(p)).rows if r.name == "data order")


def test_a_batch_of_minus_zero_against_zero_is_the_same_data():
    """A normalisation giving -0.0 on one side where the other gives 0.0: equal values, the same data order (the
    fingerprint hashed each zero's sign: red at step 0). torch tensors on one side, Paddle's on the other, compared
    as values; a planted label is red."""
    images = np.array([[0.0, 0.5], [1.0, -2.0]], "float32")
    minus = images.copy()
    minus[0, 0] = -0.0
    t = [(torch.from_numpy(images), torch.tensor([1, 0]))] * 2
    p = [[paddle.to_tensor(minus), paddle.to_tensor([1, 0])]] * 2
    row = _data_order(t, p)
    assert row.passed, row
    planted = _data_order(t, [p[0], [paddle.to_tensor(minus), paddle.to_tensor([1, 1])]])
    assert not planted.passed and "step 1" in planted.detail, planted


def test_inputs_fingerprinted_with_minus_zero_are_the_same_run():
    """What a hand-in's run record binds as its inputs: -0.0 and 0.0 one value (else `NOT the same run (inputs
    differs)`), torch and Paddle tensors alike; another value another fingerprint."""
    from portcheck.core import record
    x = np.array([0.0, 1.5, -3.0], "float32")
    minus = np.array([-0.0, 1.5, -3.0], "float32")
    same = {record.fingerprint([("x", v)]) for v in (x, minus, torch.from_numpy(minus), paddle.to_tensor(x))}
    assert len(same) == 1, same
    assert record.fingerprint([("x", x + np.float32(1e-7))]) not in same
    assert record.fingerprint([("x", np.zeros(3, "float32"))]) != record.fingerprint([("x", np.zeros(3, "int32"))])


# ---------------------------------------------------------------- a block torch shares, the map pasted

class SharedBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.norm = torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)

    def forward(self, h):
        return self.norm(h + torch.tanh(self.fc(h)))


class SharedTorch(torch.nn.Module):
    """ALBERT's habit: one block applied twice, one weight shared between its calls."""
    def __init__(self):
        super().__init__()
        self.embed, self.block, self.head = torch.nn.Embedding(50, 16), SharedBlock(), torch.nn.Linear(16, 4)

    def forward(self, ids):
        return self.head(self.block(self.block(self.embed(ids))))


class BlockPaddle(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc, self.norm = paddle.nn.Linear(16, 16), paddle.nn.LayerNorm(16)

    def forward(self, h):
        return self.norm(h + paddle.tanh(self.fc(h)))


class UntiedPaddle(paddle.nn.Layer):
    """The port: one block per call."""
    def __init__(self):
        super().__init__()
        self.embed, self.head = paddle.nn.Embedding(50, 16), paddle.nn.Linear(16, 4)
        self.blocks = paddle.nn.LayerList([BlockPaddle(), BlockPaddle()])

    def forward(self, ids):
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def test_a_shared_blocks_map_pasted_as_suggested_converts_and_is_green():
    """torch's block.fc and block.norm each run as two Paddle modules: the refusal named block.fc's entry first,
    and pasted, it was refused again at block.norm. The one map it now gives pairs both, pasted as printed; a
    planted weight in the second copy is red there."""
    torch.manual_seed(0)
    pt, pd = SharedTorch(), UntiedPaddle()
    x = np.random.RandomState(0).randint(0, 50, (2, 5)).astype("int64")
    with pytest.raises(PipelineError, match=r"\[PC316\]$") as refused:
        convert(pt, pd, inputs=x)
    maps = re.findall(r"name_map=(\{.*?\}|\[.*?\])(?: |$)", str(refused.value))
    assert len(maps) == 1, str(refused.value)
    name_map = ast.literal_eval(maps[0])
    pd.set_state_dict(convert(pt, pd, name_map, inputs=x))
    report = compare_forward(pt, pd, x, name_map)
    assert report.passed, report.table()
    w = pd.blocks[1].fc.weight
    w.set_value(w.numpy() * 1.01)
    planted = compare_forward(pt, pd, x, name_map)
    assert not planted.passed, planted.table()
