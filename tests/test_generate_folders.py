"""`python -m portcheck generate` on checkpoint folders of families other than Llama (transformers 4.45.2 against
paddlenlp 2.8.1, tiny, each side saved by its own save_pretrained as safetensors): each side's model the class its
config.json names, built from that config and filled from its shards by name. GPT-2 against paddlenlp's GPT, OPT and
BART (an encoder-decoder): the correct pair green; one tensor of the Paddle folder scaled by 1% red at its step and
module; a folder lacking a tensor, or an encoder-decoder against a decoder alone, refused in one line."""
import json
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
from portcheck import cli  # noqa: E402
from tools.zoo.generating import MASK, PROMPT, build  # noqa: E402

# family: (a tensor of the Paddle folder, the torch module it is red at)
PLANTS = {"gpt": ("gpt.decoder.layers.1.linear1.weight", "transformer.h.1.mlp.c_fc"),
          "opt": ("opt.decoder.layers.1.linear1.weight", "model.decoder.layers.1.fc1"),
          "bart": ("bart.decoder.decoder.layers.1.cross_attn.k_proj.weight", "model.decoder.layers.1.encoder_attn")}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    top = tmp_path_factory.mktemp("generate_folders")
    for family in PLANTS:
        pt, pd = build(family)
        pt.save_pretrained(top / family / "torch", safe_serialization=True)
        pd.save_pretrained(top / family / "paddle", safe_serialization=True)
    np.save(top / "prompt.npy", PROMPT[1])
    np.save(top / "batch.npy", PROMPT)
    np.save(top / "mask.npy", MASK)
    return top


def generated(capsys, top, family, paddle_dir=None, steps=2) -> tuple:
    argv = ["generate", "--torch", str(top / family / "torch"), "--paddle", str(paddle_dir or top / family / "paddle"),
            "--prompt-ids", str(top / "prompt.npy"), "--new-tokens", str(steps)]
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    captured = capsys.readouterr()
    return done.value.code, captured.out.splitlines(), captured.err


def planted(top, family, scale=1.01):
    """A copy of the family's Paddle folder, one tensor of its shards scaled."""
    name = PLANTS[family][0]
    folder = top / family / f"planted_{scale}"
    shutil.copytree(top / family / "paddle", folder)
    tensors = safetensors_numpy.load_file(folder / "model.safetensors")
    tensors[name] = tensors[name] * np.float32(scale)
    safetensors_numpy.save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "np"})
    return folder


@pytest.mark.parametrize("family", list(PLANTS))
def test_each_familys_folders_are_green_and_a_planted_weight_red_at_its_module(folders, capsys, family):
    code, out, err = generated(capsys, folders, family)
    assert code == 0 and out[0] == "compare_generate: green, 2 steps within the measured rule", (out, err)
    assert "paddle against itself: cached decoding equals" in "\n".join(out)
    code, out, err = generated(capsys, folders, family, planted(folders, family))
    assert code == 1 and out[0].startswith("compare_generate: RED, the two part at step 1"), (out, err)
    assert f"at {PLANTS[family][1]}" in out[0], out[0]


def test_a_folder_lacking_a_tensor_or_of_another_kind_is_one_line(folders, capsys):
    lacking = folders / "gpt" / "lacking"
    shutil.copytree(folders / "gpt" / "paddle", lacking)
    tensors = safetensors_numpy.load_file(lacking / "model.safetensors")
    del tensors[PLANTS["gpt"][0]]
    safetensors_numpy.save_file(tensors, str(lacking / "model.safetensors"), metadata={"format": "np"})
    code, out, err = generated(capsys, folders, "gpt", lacking)
    assert code == 2 and f"lacks {PLANTS['gpt'][0]}" in err and "[PC901]" in err, err
    code, out, err = generated(capsys, folders, "gpt", folders / "bart" / "paddle")
    assert code == 2 and "give two folders of one family [PC666]" in err, err
    unknown = folders / "gpt" / "unknown"
    shutil.copytree(folders / "gpt" / "paddle", unknown)
    config = json.loads((unknown / "config.json").read_text())
    (unknown / "config.json").write_text(json.dumps({**config, "architectures": ["NoSuchForCausalLM"]}))
    code, out, err = generated(capsys, folders, "gpt", unknown)
    assert code == 2 and "paddlenlp has no NoSuchForCausalLM" in err and "[PC667]" in err, err


def test_a_rotary_cache_larger_than_the_memory_free_is_refused_before_it_is_built(tmp_path, capsys):
    """A paddlenlp Llama folder whose config says 10**9 positions: its skeleton would build rotary caches of that
    length in every layer; one line before anything is built."""
    from examples.tiny_llama import write_pair
    torch_dir, paddle_dir = write_pair(tmp_path, num_hidden_layers=2)
    config = json.loads((paddle_dir / "config.json").read_text())
    (paddle_dir / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 10 ** 9}))
    np.save(tmp_path / "prompt.npy", PROMPT[1])
    with pytest.raises(SystemExit) as done:
        cli.main(["generate", "--torch", str(torch_dir), "--paddle", str(paddle_dir), "--prompt-ids",
                  str(tmp_path / "prompt.npy")])
    assert done.value.code == 2 and "[PC986]" in capsys.readouterr().err


def test_a_left_padded_batch_with_its_mask_is_green_and_a_mask_of_another_shape_one_line(folders, capsys):
    argv = ["generate", "--torch", str(folders / "opt" / "torch"), "--paddle", str(folders / "opt" / "paddle"),
            "--prompt-ids", str(folders / "batch.npy"), "--attention-mask", str(folders / "mask.npy"), "--new-tokens",
            "2"]
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    out = capsys.readouterr().out.splitlines()
    assert done.value.code == 0 and out[0] == "compare_generate: green, 2 steps within the measured rule", out
    assert any(line.startswith("left out of the rule, read by no real token") for line in out), out
    with pytest.raises(SystemExit) as done:
        cli.main(argv[:8] + [str(folders / "prompt.npy")] + argv[9:])
    assert done.value.code == 2 and "[PC653]" in capsys.readouterr().err
