"""`python -m portcheck layers` on PaddleFormers checkpoint folders (PaddleFormers environment only): a transformers 5
`save_pretrained` folder of a tiny Qwen3 against paddleformers' `save_pretrained` folder of its port, each loaded by
its own library and judged as loaded (portcheck.checkpoints.formers_folders); the pair as paddleformers' own converter
loads it (--convert-from-hf). The correct port green; a planted folder red at its module."""
import json

import numpy as np
import pytest
import torch

SIZES = dict(vocab_size=99, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=64)


def _folders(tmp_path, plant=None, sizes=SIZES):
    """(transformers' Qwen3ForCausalLM folder, paddleformers' Qwen3Model folder of its port): the weights put by
    portcheck.convert with the port's layouts, then each side's save_pretrained. plant(paddle model) before saving."""
    from paddleformers.transformers.qwen3.configuration import Qwen3Config as PaddleConfig
    from paddleformers.transformers.qwen3.modeling import Qwen3Model as PaddleModel
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from portcheck import convert
    from portcheck.mapping.recipes import paddleformers
    torch.manual_seed(0)
    t = Qwen3ForCausalLM(Qwen3Config(**sizes)).eval()
    p = PaddleModel(PaddleConfig(**sizes, fuse_rms_norm=False))
    p.eval()
    ids = np.random.RandomState(0).randint(0, sizes["vocab_size"], (2, 8)).astype("int64")
    convert(t.model, p, inputs=ids, layouts=paddleformers(4, 2))
    if plant:
        plant(p)
    t.save_pretrained(tmp_path / "hf")
    p.save_pretrained(str(tmp_path / "pd"))
    return tmp_path / "hf", tmp_path / "pd"


def _layers(argv, capsys) -> tuple:
    from portcheck import cli
    from portcheck.checkpoints import formers_folders
    args = cli.parser().parse_args(["layers", *map(str, argv)])
    code = formers_folders.main(args)
    out = capsys.readouterr().out.splitlines()
    return code, [line for line in out if not line.startswith("[")]  # paddleformers' log lines start "[date"


def test_a_qwen3_pair_of_folders_is_green_block_by_block_and_writes_its_page(tmp_path, capsys):
    from portcheck.checkpoints import formers_folders
    hf, pd = _folders(tmp_path)
    assert formers_folders.is_formers(pd) and not formers_folders.is_formers(hf)
    before = {f: sorted(p.name for p in f.iterdir()) for f in (hf, pd)}
    code, out = _layers(["--torch", hf, "--paddle", pd, "--html", tmp_path / "page.html"], capsys)
    assert code == 0, out
    # paddleformers' loader writes its flex-ckpt metadata beside what it reads: never into the user's folders
    assert {f: sorted(p.name for p in f.iterdir()) for f in (hf, pd)} == before
    assert "layers.1: cumulative green, isolated green" in out, out
    assert out[-1] == "4 blocks, each side loaded from its own folder: green, cumulative and isolated", out
    assert any("both sides compared as" in line for line in out), out
    assert (tmp_path / "page.html").stat().st_size > 0


def test_a_planted_norm_weight_in_the_paddle_folder_is_red_at_that_norm(tmp_path, capsys):
    def plant(p):
        w = p.layers[1].input_layernorm.weight
        w.set_value(w.numpy() * 1.01)
    hf, pd = _folders(tmp_path, plant)
    code, out = _layers(["--torch", hf, "--paddle", pd], capsys)
    assert code == 1, out
    assert "layers.0: cumulative green, isolated green" in out, out
    assert any(line.startswith("layers.1: cumulative RED at layers.1.input_layernorm") for line in out), out
    assert "RED: first diverging layers.1.input_layernorm (block layers.1)" in out[-1], out[-1]


def test_a_planted_rms_norm_eps_in_the_paddle_config_is_red_at_the_first_norm(tmp_path, capsys):
    hf, pd = _folders(tmp_path)
    config = json.loads((pd / "config.json").read_text())
    config["rms_norm_eps"] = 1e-3
    (pd / "config.json").write_text(json.dumps(config))
    code, out = _layers(["--torch", hf, "--paddle", pd], capsys)
    assert code == 1 and "RED: first diverging layers.0.input_layernorm (block layers.0)" in out[-1], out


def test_the_pair_as_paddleformers_own_converter_loads_it_is_green_as_loaded(tmp_path, capsys):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(1)
    Qwen3ForCausalLM(Qwen3Config(**SIZES)).save_pretrained(tmp_path / "hf")
    code, out = _layers(["--torch", tmp_path / "hf", "--paddle", tmp_path / "hf", "--convert-from-hf"], capsys)
    assert code == 0, out
    assert "the Paddle model: paddleformers' Qwen3Model.from_pretrained(folder, convert_from_hf=True)" in out, out
    # Qwen3ForCausalLM cannot be built without paddlefleet: said in one line, both sides the base model
    assert any(line.startswith("Qwen3ForCausalLM builds paddlefleet's own model") for line in out), out


def test_a_folder_split_for_two_ranks_is_one_line(tmp_path):
    from portcheck.core.errors import PipelineError
    from portcheck.checkpoints import formers_folders
    hf, pd = _folders(tmp_path)
    config = json.loads((pd / "config.json").read_text())
    config["tensor_model_parallel_size"] = 2
    (pd / "config.json").write_text(json.dumps(config))
    ids = np.zeros((1, 4), dtype="int64")
    with pytest.raises(PipelineError, match=r"tensor_model_parallel_size 2.*\[PC352\]"):
        formers_folders.compare(hf, pd, ids)


def test_the_large_models_page_shows_what_the_command_prints(tmp_path, capsys):
    """docs/large_models.md's two printed blocks of PaddleFormers folders: each of their lines is a line the
    command prints on the pair of this file, green and with the norm planted."""
    import re
    from pathlib import Path
    page = (Path(__file__).resolve().parents[2] / "docs" / "large_models.md").read_text(encoding="utf-8")
    section = page.split("## PaddleFormers checkpoint folders", 1)[1].split("\n## ", 1)[0]
    green, red = re.findall(r"```text\n(.*?)```", section, re.S)

    def plant(p):
        w = p.layers[1].input_layernorm.weight
        w.set_value(w.numpy() * 1.01)
    for shown, planted, folder in ((green, None, "green"), (red, plant, "red")):
        hf, pd = _folders(tmp_path / folder, planted)
        _, out = _layers(["--torch", hf, "--paddle", pd], capsys)
        assert set(shown.splitlines()) <= set(out), (shown, out)


MOE = {"qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                     dict(SIZES, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True)),
       # DeepSeek-V3's attention in paddleformers reads rope_parameters["factor"] (a finding pinned in
       # test_formers_findings): a yarn RoPE of factor 1 is the default's numbers with the key it reads
       "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                       dict(vocab_size=99, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4,
                            num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=32,
                            kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
                            max_position_embeddings=64,
                            rope_scaling={"rope_type": "yarn", "factor": 1.0, "original_max_position_embeddings": 64,
                                          "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
                                          "mscale_all_dim": 1.0}))}


@pytest.mark.parametrize("family", sorted(MOE))
def test_a_mixture_of_experts_as_paddleformers_converter_loads_it_is_green_as_loaded(family, tmp_path):
    """Qwen3-MoE (packed experts against one module per expert, paired by index) and DeepSeek-V3 (MLA attention),
    the Paddle side paddleformers' from_pretrained(folder, convert_from_hf=True): the last hidden states within
    torch's own fp32 error (about 1e-6 on these configs)."""
    import transformers
    from portcheck.checkpoints import formers_folders
    config, model, sizes = MOE[family]
    torch.manual_seed(0)
    getattr(transformers, model)(getattr(transformers, config)(**sizes)).save_pretrained(tmp_path / family)
    ids = np.random.RandomState(0).randint(0, 99, (2, 8)).astype("int64")
    report, said = formers_folders.compare(tmp_path / family, tmp_path / family, ids, convert_from_hf=True)
    assert report.passed, (report.first_diverging, report.differing[:3])
    last = next(r for r in report.rows if r.name.startswith("(model)"))
    assert last.max < 1e-5, last.max
    # compare_backward with no layouts: each fused module in the layout the Paddle model holds, the routing read
    # (Qwen3-MoE: the router's probabilities judged against paddleformers' logits; DeepSeek-V3: its top-k router's
    # experts and weights against those torch's block hands its experts)
    import paddle
    from portcheck import compare_backward
    t, p, _, _ = formers_folders.load(tmp_path / family, tmp_path / family, convert_from_hf=True)
    with torch.no_grad():  # the first output: DeepSeek-V3's causal LM builds here, its logits
        shape = tuple(t(input_ids=torch.from_numpy(ids))[0].shape)
    target = np.random.RandomState(1).randn(*shape).astype("float32")
    loss = (lambda o, y: ((o[0] - y) ** 2).mean(),) * 2
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.01), lambda ps: paddle.optimizer.SGD(0.01, parameters=ps))
    backward = compare_backward(t.train(), p.train(), ids, target, loss=loss, optimizer=sgd, steps=1)
    assert backward.passed, backward.table()
    routed = backward.forward.routing
    assert routed and all(not r.said and not r.red for r in routed), [r.line() for r in routed]
    if family == "qwen3_moe":
        assert "layers.0.self_attn.qkv_proj" in backward.fused_found, backward.fused_found
    else:
        assert all(r.topk and r.weights_row.passed for r in routed), [r.line() for r in routed]


def test_a_paddle_folder_missing_a_weight_is_paddleformers_refusal_in_one_line(tmp_path):
    """A shard cut short of a tensor: paddleformers' own loader refuses it, said in one line (PC354) with its
    reason, never a model half loaded and judged."""
    from safetensors.numpy import load_file, save_file
    from portcheck.core.errors import PipelineError
    from portcheck.checkpoints import formers_folders
    hf, pd = _folders(tmp_path)
    index = json.loads((pd / "model.safetensors.index.json").read_text())
    name = "model.layers.1.mlp.down_proj.weight"
    shard = pd / index["weight_map"].pop(name)
    tensors = load_file(shard)
    del tensors[name]
    save_file(tensors, shard)
    (pd / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(PipelineError) as e:
        formers_folders.compare(hf, pd, np.zeros((1, 4), dtype="int64"))
    assert "[PC354]" in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_generate_on_a_folder_whose_head_cannot_be_built_here_is_one_line(tmp_path, capsys):
    """`python -m portcheck generate` on PaddleFormers folders: paddleformers' causal LMs build paddlefleet's own
    model, not on PyPI; the base model has no head to generate with, said in one line."""
    from portcheck import cli
    hf, pd = _folders(tmp_path)
    np.save(tmp_path / "prompt.npy", np.arange(1, 6, dtype="int64"))
    with pytest.raises(SystemExit) as done:
        cli.main(["generate", "--torch", str(hf), "--paddle", str(pd), "--prompt-ids", str(tmp_path / "prompt.npy")])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "a model with no LM head cannot generate [PC670]" in err, err


@pytest.mark.parametrize("planted", [False, True])
def test_generate_on_a_llama_pair_of_folders_decodes_with_each_librarys_cache(planted, tmp_path):
    """`python -m portcheck generate` on PaddleFormers folders whose causal LM is plain Paddle (llama's: its modeling
    module defines no provider of paddlefleet's model): each side loaded by its own library, decoded by its own loop,
    green; one layer's o_proj scaled 1% in the Paddle folder red at that layer. The command in a process of its own,
    as a user runs it (paddleformers' loader keeps state from a load it refused before, in the same process)."""
    import os
    import subprocess
    import sys
    from tools.zoo import formers_generating
    from tools.zoo.generating import PROMPT
    t, p = formers_generating.build("llama")
    if planted:
        w = p.model.layers[1].self_attn.o_proj.weight
        w.set_value(w.numpy() * 1.01)
    t.save_pretrained(tmp_path / "hf")
    p.save_pretrained(str(tmp_path / "pd"))
    np.save(tmp_path / "prompt.npy", np.asarray(PROMPT, dtype="int64")[1:])
    done = subprocess.run([sys.executable, "-m", "portcheck", "generate", "--torch", str(tmp_path / "hf"),
                           "--paddle", str(tmp_path / "pd"), "--prompt-ids", str(tmp_path / "prompt.npy")],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=600)
    if planted:
        assert done.returncode == 1 and "RED" in done.stdout and "layers.1.self_attn" in done.stdout, done.stdout
    else:
        assert done.returncode == 0 and "compare_generate: green, 8 steps" in done.stdout, done.stdout + done.stderr
