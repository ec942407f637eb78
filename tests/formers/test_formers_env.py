"""The PaddleFormers environment itself: installed as requirements-formers.txt pins it, paddleformers' modeling modules
importable with paddlefleet's two modules stood in for (and the one that needs paddlefleet itself said as such), and
the library at work in it (numpy 1.26, transformers 5) on the family that pairs with no map."""
import importlib
import re
from importlib import metadata
from pathlib import Path

import numpy as np
import paddle
import pytest
import torch
import transformers

import portcheck
from portcheck.checkpoints import fleet as formers_standins

ROOT = Path(__file__).resolve().parents[2]
# the modeling modules that import paddlefleet_ops or gpt_provider at load (portcheck.checkpoints.fleet)
STOOD_IN = ["qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "qwen3_next", "deepseek_v3", "glm4_moe"]


def test_the_venv_holds_what_requirements_formers_pins():
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements-formers.txt").read_text(), re.M))
    assert {"paddleformers", "transformers", "numpy", "torch", "paddlepaddle"} <= set(pins)
    installed = {name: metadata.version(name).split("+")[0] for name in pins}
    assert installed == pins
    for page in ("README.md", "README_cn.md", "docs/zoo.md", "docs/zoo_cn.md"):  # the versions the pages say
        text = (ROOT / page).read_text(encoding="utf-8")
        assert f"paddleformers {pins['paddleformers']}" in text and f"transformers {pins['transformers'][:3]}" in text


def test_the_stack_paddleformers_loads_imports_beside_numpy_1_26():
    """datasets imports pyarrow, whose newest release refuses numpy 1.x at import while pip check stays clean."""
    import datasets
    import pyarrow
    assert np.__version__.startswith("1.26") and datasets.Dataset.from_dict({"a": [1, 2]}).num_rows == 2
    assert pyarrow.__version__


@pytest.mark.parametrize("family", STOOD_IN)
def test_a_base_model_imports_with_paddlefleets_modules_stood_in_for(family):
    assert formers_standins.needed(), "paddlefleet is installed here: the stand-ins are not in use"
    module = importlib.import_module(f"paddleformers.transformers.{family}.modeling")
    assert any(name.endswith("Model") and not name.endswith("PretrainedModel") for name in vars(module))


def test_what_needs_paddlefleet_itself_says_so():
    """minimax_m2 imports paddlefleet itself: not buildable from PyPI, and not hidden by a stand-in."""
    with pytest.raises(ModuleNotFoundError, match="paddlefleet"):
        importlib.import_module("paddleformers.transformers.minimax_m2.modeling")


@pytest.mark.parametrize("plant", [None, "rms_norm_eps"])
def test_a_llama_pair_converts_and_is_green_with_no_map_and_a_planted_epsilon_red_at_its_norm(plant):
    """The correct port green; a port that builds its RMSNorm with another epsilon (a config default not carried
    over) red at the first norm."""
    from paddleformers.transformers.llama.configuration import LlamaConfig
    from paddleformers.transformers.llama.modeling import LlamaModel
    tiny = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=64, use_cache=False, rms_norm_eps=1e-6)
    torch.manual_seed(0)
    paddle.seed(0)
    pt = transformers.LlamaModel(transformers.LlamaConfig(**tiny)).eval()
    pd = LlamaModel(LlamaConfig(**{**tiny, "rms_norm_eps": 1e-5 if plant else 1e-6}, fuse_rms_norm=False)).eval()
    inputs = {"input_ids": np.random.RandomState(0).randint(3, 100, (2, 7))}
    pd.set_state_dict(portcheck.convert(pt, pd, inputs=inputs))
    report = portcheck.compare_forward(pt, pd, inputs)
    if plant is None:
        assert report.passed, report.table()
    else:
        assert not report.passed and report.first_diverging == "layers.0.input_layernorm", report.table()
