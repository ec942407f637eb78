"""Layer by layer from checkpoint files (issue 65, portcheck.stream): a clean pair is green block by block; a bug
planted in a middle layer (an RMSNorm epsilon, a rotary base, a gate/up swap in the converted checkpoint) is named
at that layer and module, cumulative and isolated; a bf16 pair is upcast and said so; a checkpoint that does not
fit, or is a pickle, is one line. The pairs are written by the libraries' own save_pretrained."""
import json
import re
import shutil

import numpy as np
import pytest

from portcheck import cli
from portcheck.checkpoints import stream
from portcheck.core.errors import PipelineError
from portcheck.core.page import page as as_page
from examples.tiny_llama import write_pair
from test_docs_blocks import DOCS, printed_as_said, python_blocks, run_in_process

IDS = np.random.RandomState(0).randint(0, 64, (2, 8)).astype("int64")
MIDDLE = 3


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """docs/large_models.md's program, run alone in an empty folder with fresh globals, in this process (which
    imports transformers and paddlenlp already; tests/test_docs_blocks.py): (its folder, status, output)."""
    folder = tmp_path_factory.mktemp("stream")
    code, _ = python_blocks(DOCS / "large_models.md")[0]  # the page's third is tests/test_split.py's
    return (folder / "block0", *run_in_process([code], folder)[0])


@pytest.fixture(scope="module")
def pair(page):
    """The clean pair the page's program wrote (examples/tiny_llama.py)."""
    return page[0] / "torch", page[0] / "paddle"


def test_the_pages_block_runs_alone_and_prints_what_the_page_says(page):
    _, said = python_blocks(DOCS / "large_models.md")[0]
    assert page[1] == 0 and not printed_as_said(page[2], said), page[2][-3000:]


def test_the_pages_planted_block_runs_alone_and_prints_what_the_page_says(tmp_path):
    code, said = python_blocks(DOCS / "large_models.md")[1]  # the same pair with an RMSNorm's epsilon planted
    status, output = run_in_process([code], tmp_path)[0]
    assert status == 0 and not printed_as_said(output, said), output[-3000:]


def named_at(report, layer: int) -> bool:
    """The bug named in `layer`, by a module inside it, cumulative and isolated; every other block's own
    computation within its rule."""
    block = f"model.layers.{layer}"
    return (not report.passed and report.block_of(report.first_diverging) == block
            and report.first_diverging.startswith(block + ".") and report.first_isolated.startswith(block + ".")
            and [b.name for b in report.blocks if not b.isolated.passed] == [block])


def test_a_clean_pair_is_green_block_by_block_and_a_planted_epsilon_is_named(pair):
    report = stream.compare(*pair, {"input_ids": IDS})
    assert report.passed, report.table()
    assert [b.name for b in report.blocks] == ["model.embed_tokens", *(f"model.layers.{i}" for i in range(6)),
                                               "model.norm", "lm_head"]
    rows = report.cumulative.paired
    assert "model.layers.5.mlp.down_proj" in {r.name for r in rows} and rows[-1].name == "(model)"
    assert not report.upcast and report.first_diverging is None
    model = stream.paddle_skeleton(pair[1])
    model.llama.layers[MIDDLE].post_attention_layernorm.variance_epsilon = 1e-3
    planted = stream.compare(*pair, {"input_ids": IDS}, paddle_model=model)
    assert named_at(planted, MIDDLE), planted.table()
    assert planted.first_diverging == f"model.layers.{MIDDLE}.post_attention_layernorm"
    assert report.parting == [] and [m for m, _ in planted.parting] == [planted.first_diverging]
    assert f"first diverging: model.layers.{MIDDLE}.post_attention_layernorm" in planted.table()
    shown, clean = as_page(planted.view()), as_page(report.view())  # its page: the block open down to the module marked
    assert f'id="first-diverging" data-module="{planted.first_diverging}"' in shown
    assert f'<details class="node" open data-path="model.layers.{MIDDLE}">' in shown
    assert 'data-verdict="green"' in clean and 'id="first-diverging"' not in clean and 'class="row red' not in clean


def test_a_rotary_base_planted_in_one_layer_is_named_there(pair):
    from paddlenlp.transformers.llama.modeling import LlamaRotaryEmbedding
    model = stream.paddle_skeleton(pair[1])
    attention = model.llama.layers[MIDDLE].self_attn
    attention.rotary_emb = LlamaRotaryEmbedding(attention.head_dim, attention.max_position_embeddings, base=5e5)
    report = stream.compare(*pair, IDS, paddle_model=model)
    assert named_at(report, MIDDLE), report.table()
    assert report.first_diverging.startswith(f"model.layers.{MIDDLE}.self_attn")


def test_gate_and_up_swapped_in_the_converted_checkpoint_are_named(pair, tmp_path):
    from safetensors.numpy import load_file, save_file
    swapped = tmp_path / "paddle"
    shutil.copytree(pair[1], swapped)
    where = json.loads((swapped / stream.INDEX).read_text())["weight_map"]
    gate, up = (f"llama.layers.{MIDDLE}.mlp.{p}_proj.weight" for p in ("gate", "up"))
    files = {where[gate]: load_file(swapped / where[gate]), where[up]: load_file(swapped / where[up])}
    files[where[gate]][gate], files[where[up]][up] = files[where[up]][up], files[where[gate]][gate]
    for name, tensors in files.items():
        save_file(tensors, swapped / name, metadata={"format": "np"})
    report = stream.compare(pair[0], swapped, IDS)
    assert named_at(report, MIDDLE), report.table()
    assert report.first_diverging == f"model.layers.{MIDDLE}.mlp.gate_proj"
    red = [b.name for b in report.blocks if not b.cumulative.passed]
    assert red[0] == f"model.layers.{MIDDLE}" and len(red) > 1  # the later blocks red by what it carries
    shown = as_page(report.view())  # its page: the block where the runs part open, every later red one collapsed
    assert re.findall(r'<details class="node" open data-path="model\.layers\.(\d+)"', shown) == [str(MIDDLE)]


def test_a_bf16_pair_is_upcast_per_block_and_said(tmp_path):
    t_dir, p_dir = write_pair(tmp_path / "bf16", "bfloat16", num_hidden_layers=2)
    shards = stream.Shards(p_dir, "paddle")
    assert {t[1] for t in shards.tensors.values()} == {"U16"}  # paddlenlp writes bfloat16 as its bits
    report = stream.compare(t_dir, p_dir, IDS)
    assert report.passed, report.table()
    assert report.upcast == {"torch": "bfloat16", "paddle": "bfloat16"}
    assert report.table().startswith("weights upcast per block from torch bfloat16, paddle bfloat16")
    # the same model's float32 checkpoint against the bf16 port: its weights are rounded, named at the first block
    f32 = write_pair(tmp_path / "f32", num_hidden_layers=2)[0]
    mixed = stream.compare(f32, p_dir, IDS)
    assert not mixed.passed and mixed.first_diverging == "model.embed_tokens"


def layers(*argv):
    with pytest.raises(SystemExit) as e:
        cli.main(["layers", *map(str, argv)])
    return e.value.code


def test_a_paddleformers_folder_here_is_one_line_naming_its_environment(tmp_path, capsys):
    """paddleformers lives in an environment of its own (requirements-formers.txt): a folder it saved, or
    --convert-from-hf, in this one is PC357's line, not an import's traceback."""
    (tmp_path / "config.json").write_text('{"model_type": "qwen3", "paddleformers_version": "1.2.0"}')
    for extra in ([], ["--convert-from-hf"]):
        assert layers("--torch", tmp_path, "--paddle", tmp_path, *extra) == 2
        err = capsys.readouterr().err
        assert "paddleformers is not installed here" in err and "[PC357]" in err, err


@pytest.mark.parametrize("tp", [[], ["--tp", "2"]], ids=["whole", "--tp 2"])
def test_a_file_given_for_a_folder_is_one_line_naming_the_folder(tmp_path, capsys, tp):
    """A folder's config.json given: "no config.json" (PC909) said of the file, as if it were a folder without one."""
    (tmp_path / "config.json").write_text("{}")
    given = tmp_path / "config.json"
    assert layers("--torch", given, "--paddle", given, *tp) == 2
    err = capsys.readouterr().err
    assert f"a file, not a folder; give the folder holding it ({tmp_path})" in err and "[PC490]" in err, err
    assert err.count("\n") == 1 and "PC909" not in err


def test_a_checkpoint_that_does_not_fit_or_is_a_pickle_is_one_line(pair, tmp_path, capsys):
    assert layers("--torch", pair[0], "--paddle", pair[1], "--tokens", "1x4", "--html", tmp_path / "p.html") == 0
    assert capsys.readouterr().out.strip().endswith("9 blocks: green, cumulative and isolated")
    shown = (tmp_path / "p.html").read_text()  # its page (a red one: test_a_clean_pair_is_green_...)
    assert 'data-verdict="green"' in shown and 'data-path="model.layers.5"' in shown
    assert 'id="first-diverging"' not in shown
    (tmp_path / "mine.html").write_text("my own notes")  # --html never over a file of the user's: before any block
    assert layers("--torch", pair[0], "--paddle", pair[1], "--html", tmp_path / "mine.html") == 2
    assert "[PC191]" in capsys.readouterr().err and (tmp_path / "mine.html").read_text() == "my own notes"
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(pair[1] / "config.json", pickled)
    (pickled / "model_state.pdparams").write_bytes(b"\x80\x04 not to be loaded")
    assert layers("--torch", pair[0], "--paddle", pickled) == 2
    err = capsys.readouterr().err
    assert "model_state.pdparams, a pickle" in err and "safe_serialization=True" in err and err.count("\n") == 1
    assert layers("--torch", pair[0], "--paddle", pair[1], "--tokens", "4") == 2
    assert "--tokens '4'" in capsys.readouterr().err
    # a key the model lacks, one it needs, a shape that differs: each refused before any block runs
    bigger = write_pair(tmp_path / "wider", num_hidden_layers=7)[1]
    with pytest.raises(PipelineError, match="the torch model has 6 decoder layers, the Paddle one 7"):
        stream.compare(pair[0], bigger, IDS, paddle_model=stream.paddle_skeleton(pair[1]))
    with pytest.raises(PipelineError, match="holds llama.layers.6.*which the paddle model built from its config lacks"):
        stream._matched(stream.Shards(bigger, "paddle"), stream._paddle_expected(stream.paddle_skeleton(pair[1])), {})
    with pytest.raises(PipelineError, match="lacks llama.layers.6.*does not fit its config's model"):
        stream.compare(pair[0], pair[1], IDS, paddle_model=stream.paddle_skeleton(bigger))
    wider = write_pair(tmp_path / "mlp", intermediate_size=96)[1]
    with pytest.raises(PipelineError, match=r"llama.layers.0.mlp.gate_proj.weight is \[32, 96\], the paddle model's"):
        stream.compare(pair[0], wider, IDS, paddle_model=stream.paddle_skeleton(pair[1]))
    with pytest.raises(PipelineError, match="give the token ids as an integer array"):
        stream.compare(*pair, IDS.astype("float32"))
    extra = tmp_path / "extra"  # an older checkpoint's inv_freq is computed from the config; any other key is not
    shutil.copytree(pair[0], extra)
    from safetensors.numpy import save_file
    index = json.loads((extra / stream.INDEX).read_text())
    for key in ("model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.0.mlp.extra.weight"):
        save_file({key: np.ones(4, "float32")}, extra / f"{key}.safetensors")
        index["weight_map"][key] = f"{key}.safetensors"
        (extra / stream.INDEX).write_text(json.dumps(index))
        if "inv_freq" in key:
            model = stream.torch_skeleton(extra)
            assert len(stream._matched(stream.Shards(extra, "torch"), stream._torch_expected(model), {})) == len(
                stream._torch_expected(model))
    with pytest.raises(PipelineError, match="holds model.layers.0.mlp.extra.weight, which the torch model"):
        stream._matched(stream.Shards(extra, "torch"), stream._torch_expected(model), {})
    broken = tmp_path / "broken"
    shutil.copytree(pair[0], broken)
    shard = sorted(broken.glob("*.safetensors"))[0]
    shard.write_bytes(shard.read_bytes()[:-4])  # a shard cut short: its last tensor's bytes lie outside it
    with pytest.raises(PipelineError, match="is not a safetensors file .*lie outside the file"):
        stream.Shards(broken, "torch")



def test_an_rmsnorm_of_a_7b_width_is_green_where_paddle_sums_its_row_left_to_right():
    """Layer 0's input RMSNorm of a 7B (hidden 4096, bf16 embeddings): Paddle's CPU mean sums the squares left to
    right, torch's pairwise, a correct port's difference of about sqrt(n) roundings, beyond 16 (1.15x its allowance
    on these rows at a floor of 16 while torch's float64 run rounded through the norm's cast to float32; 0.76x now
    it keeps float64, twin.wide_casts); with the floor's ROOT x sqrt(n), 0.32x. An epsilon of 1e-6 for 1e-5
    there stays red (1,179x)."""
    import torch
    from paddlenlp.transformers import LlamaConfig as PaddleConfig
    from paddlenlp.transformers.llama.modeling import LlamaRMSNorm as PaddleNorm
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    from portcheck import compare_forward
    from portcheck.core import calibrated
    rng = np.random.default_rng(1)
    bf16 = lambda a: torch.from_numpy(a.astype("float32")).to(torch.bfloat16).float().numpy()  # noqa: E731
    x, w = bf16(rng.standard_normal((2, 16, 4096)) * 0.02), bf16(1 + rng.standard_normal(4096) * 0.1)
    pt = LlamaRMSNorm(4096, eps=1e-5)
    pt.weight.data = torch.from_numpy(w)
    pd = PaddleNorm(PaddleConfig(hidden_size=4096, rms_norm_eps=1e-5))
    pd.weight.set_value(w)
    report = compare_forward(pt, pd, x, mean_bound=None)
    row = report.rows[0]
    assert report.passed and row.max / row.allowed < 0.5, report.table()
    assert row.max > calibrated.FLOOR * calibrated.EPS32 * row.scale  # beyond 16 roundings: the own error covers it
    pd.variance_epsilon = 1e-6
    assert not compare_forward(pt, pd, x, mean_bound=None).passed

