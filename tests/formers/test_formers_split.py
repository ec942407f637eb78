"""`python -m portcheck layers --tp 2` on PaddleFormers checkpoint folders (PaddleFormers environment only): a tiny
Qwen3's transformers folder against paddleformers' folder of its port, the Paddle model loaded by paddleformers itself
in 2 tensor-parallel ranks (CPU, gloo; portcheck.checkpoints.formers_split). The correct pair green block by block;
a tensor of the folder scaled 1% where rank 1 loads it red at its module, on rank 1."""
import json

import numpy as np
import pytest
from test_formers_folders import SIZES, _folders


def _layers(argv, capsys) -> tuple:
    """(exit status, the lines printed) of `layers` with --tp on PaddleFormers folders, as the command runs it."""
    from portcheck import cli
    from portcheck.checkpoints import formers_split
    code = formers_split.main(cli.parser().parse_args(["layers", *map(str, argv)]))
    out = capsys.readouterr().out.splitlines()
    return code, [line for line in out if not line.startswith("[")]  # paddleformers' log lines start "[date"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(transformers' folder, paddleformers' folder, the token ids file)."""
    tmp = tmp_path_factory.mktemp("split")
    hf, pd = _folders(tmp, sizes=dict(SIZES, vocab_size=98))  # each rank holds half the vocabulary
    np.save(tmp / "ids.npy", np.random.RandomState(0).randint(0, 98, (2, 8)).astype("int64"))
    return hf, pd, tmp / "ids.npy"


def test_a_qwen3_folder_split_across_two_ranks_by_paddleformers_is_green_block_by_block(pair, capsys):
    hf, pd, ids = pair
    code, out = _layers(["--torch", hf, "--paddle", pd, "--tp", "2", "--ids", ids], capsys)
    assert code == 0, out
    assert "layers.1: cumulative green, isolated green" in out, out
    assert "the Paddle model ran split across 2 ranks" in out[-2] and "flex checkpoint's resharding" in out[-2], out
    assert out[-1] == ("4 blocks, the Paddle folder loaded by paddleformers split across 2 ranks: green, cumulative "
                       "and isolated"), out


def test_a_tensor_scaled_where_rank_1_loads_it_is_red_at_its_module_on_rank_1(pair, tmp_path, capsys):
    """up_proj's rows rank 1 holds (the second half of its output features: a column-parallel layer's) scaled 1%
    in the folder: red at layers.1.mlp.up_proj, on rank 1 alone, cumulative and isolated."""
    import shutil
    from safetensors.numpy import load_file, save_file
    hf, pd, ids = pair
    planted = tmp_path / "pd"
    shutil.copytree(pd, planted)
    name = "model.layers.1.mlp.up_proj.weight"
    shard = planted / json.loads((planted / "model.safetensors.index.json").read_text())["weight_map"][name]
    tensors = load_file(shard)
    rows = tensors[name].shape[0] // 2
    tensors[name][rows:] *= 1.01
    save_file(tensors, shard)
    code, out = _layers(["--torch", hf, "--paddle", planted, "--tp", "2", "--ids", ids], capsys)
    assert code == 1, out
    assert "layers.0: cumulative green, isolated green" in out, out
    assert "layers.1: cumulative RED at layers.1.mlp.up_proj on rank 1 [PC929], isolated RED at " \
           "layers.1.mlp.up_proj on rank 1 [PC929]" in out, out
    assert "RED: first diverging layers.1.mlp.up_proj (block layers.1) on rank 1;" in out[-1], out[-1]


def test_a_folder_saved_split_is_one_line_and_tp_1_too(pair, tmp_path):
    from portcheck import cli
    from portcheck.checkpoints import formers_folders, formers_split
    from portcheck.core.errors import PipelineError
    hf, pd, ids = pair
    config = json.loads((pd / "config.json").read_text())
    (tmp_path / "pd").mkdir()
    (tmp_path / "pd" / "config.json").write_text(json.dumps({**config, "tensor_model_parallel_size": 2}))
    with pytest.raises(PipelineError, match=r"tensor_model_parallel_size 2; .* --tp N to split it .*\[PC352\]$"):
        formers_folders.classes(hf, tmp_path / "pd")
    args = cli.parser().parse_args(["layers", "--torch", str(hf), "--paddle", str(pd), "--tp", "1"])
    with pytest.raises(PipelineError, match=r"^--tp 1: .*\[PC928\]$"):
        formers_split.main(args)


def test_a_qwen3_moe_folder_split_across_two_ranks_is_green_its_routing_read(tmp_path):
    """Qwen3-MoE as paddleformers' own converter loads it on each rank: torch's packed experts said as a list where
    the ranks' model holds one (mapping.experts, from rank 0's record), so the router's probabilities are judged
    against the ranks' logits as a router's, and each token's experts compared."""
    import torch
    import transformers
    from test_formers_folders import MOE
    from portcheck.checkpoints import formers_split
    config, model, sizes = MOE["qwen3_moe"]
    torch.manual_seed(0)
    getattr(transformers, model)(getattr(transformers, config)(**dict(sizes, vocab_size=98))).save_pretrained(
        tmp_path / "moe")
    ids = np.random.RandomState(0).randint(0, 98, (2, 8)).astype("int64")
    report, _ = formers_split.compare(tmp_path / "moe", tmp_path / "moe", ids, 2, convert_from_hf=True)
    assert report.passed, report.table()
    routed = sorted(report.routing, key=lambda r: r.router)
    assert [r.line() for r in routed] == [
        f"routing at layers.{i}.mlp.gate: each of 16 tokens reached the same experts of 4, their router weights "
        f"within {r.weight_diff:.3g}" for i, r in enumerate(routed)], report.table()
