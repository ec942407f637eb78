"""weights/torch2paddle.py: an exact round trip, transposes chosen by module type, and every refusal."""
import hashlib

import numpy as np
import paddle
import pytest
import torch

from portcheck.errors import PipelineError
from conftest import error_line, run
from weights.torch2paddle import convert

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


def test_transpose_is_decided_by_module_type():
    model = Odd()
    state = model.state_dict()
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    out, n = convert(state, model, shapes, name_map={})
    assert n == 1
    np.testing.assert_array_equal(out["mixer.weight"], state["mixer.weight"].numpy().T)
    np.testing.assert_array_equal(out["table.weight"], state["table.weight"].numpy())


@pytest.mark.parametrize("name_map, shapes_edit, expected", [
    ({}, lambda s: s.pop("table.weight"), "torch key table.weight has no Paddle parameter"),
    ({}, lambda s: s.update(extra=(3,)), "Paddle parameter extra is not filled"),
    ({}, lambda s: s.update({"mixer.bias": (4,)}), "shape (3,) != Paddle (4,)"),
    ({"mixer.bias": "mixer.weight"}, lambda s: None, "filled by 2 torch keys"),
])
def test_convert_refuses(name_map, shapes_edit, expected):
    model = Odd()
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    shapes_edit(shapes)
    with pytest.raises(PipelineError, match="nothing written") as e:
        convert(model.state_dict(), model, shapes, name_map=name_map)
    assert expected in str(e.value)


@pytest.mark.parametrize("edit, expected", [
    (lambda s: s.pop("pooler.dense.bias"), "pooler.dense.bias is not filled"),
    (lambda s: s.update({"cls.predictions.bias": torch.zeros(3)}), "cls.predictions.bias"),
    (lambda s: s.update({"pooler.dense.bias": torch.zeros(7)}), "pooler.dense.bias -> pooler.dense.bias: shape (7,)"),
])
def test_script_refuses_and_writes_nothing(home, edit, expected):
    state = torch.load(home / "weights/torch_weight.bin", weights_only=True)
    edit(state)
    torch.save(state, home / "weights/torch_weight.bin")
    before = digest(home / "weights/paddle_weight.pdparams")
    proc = run(CONVERT, home=home, check=2)
    assert expected in error_line(proc)
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
