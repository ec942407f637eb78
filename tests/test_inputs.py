"""Every bad input ends in one line: the model config, the vocabulary, the input ids, the weights, seeds,
Ctrl-C, run_all's data pre-flight, and the messages a newcomer meets. Flags and configs are refused before a
framework loads, so most cases here run in-process or in a script that stops within a second; each script
launch tests something new."""
import ast
import dataclasses
import importlib.util
import json
import os
import pickle
import signal
import subprocess
import sys

import numpy as np
import pytest

from bert_sst2 import flags, inputs
from portcheck.core import errors, fileio
from portcheck.core.errors import PipelineError
from conftest import ROOT, error_line, run
from models.configuration_bert import BertConfig, read_vocab

ENTRY_SCRIPTS = sorted(p for folder in ("pipeline", "weights", "classifier_weights", "fake_data", "tools")
                       for p in (ROOT / folder).rglob("*.py") if "import portcheck.core.runtime" in p.read_text())
EXPORT = "weights/torch_bert_weights.py"


def load_script(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def snapshot(folder):
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# ---------------------------------------------------------------------------------------- model config

TINY = json.loads((ROOT / "tests/tiny_config.json").read_text())


@pytest.mark.parametrize("change, says", [
    # the cases
    ({"num_hidden_layers": -1}, "num_hidden_layers must be an integer >= 1, got -1"),
    ({"num_attention_heads": 0}, "num_attention_heads must be an integer >= 1"),
    ({"hidden_act": "swish"}, "hidden_act 'swish' is not one of"),
    ({"layer_norm_eps": -1}, "layer_norm_eps must be a number > 0"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob must be a number in [0, 1)"),
    ({"hidden_size": "abc"}, "hidden_size must be an integer >= 1, got 'abc'"),
    ({"num_attention_heads": 5}, "hidden_size 32 is not a multiple of num_attention_heads 5"),
    # the hostile pass
    ({"layer_norm_eps": float("nan")}, "layer_norm_eps must be a number"),
    ({"attention_probs_dropout_prob": 1.0}, "attention_probs_dropout_prob must be a number in [0, 1)"),
    ({"hidden_dropout_prob": "0.1"}, "hidden_dropout_prob must be a number"),
    ({"initializer_range": -0.02}, "initializer_range must be a number >= 0"),
    ({"hidden_size": 32.0}, "hidden_size must be an integer"),
    ({"num_hidden_layers": True}, "num_hidden_layers must be an integer"),
    ({"vocab_size": 0}, "vocab_size must be an integer >= 1"),
    ({"max_position_embeddings": -5}, "max_position_embeddings must be an integer >= 1"),
    ({"type_vocab_size": 0}, "type_vocab_size must be an integer >= 1"),
    ({"num_labels": 1}, "num_labels must be an integer >= 2"),
    ({"pad_token_id": 30522}, "pad_token_id 30522 is not below vocab_size"),
    ({"intermediate_size": None}, "intermediate_size must be an integer"),
    ({"vocab_size": 10 ** 12}, "parameters, more than"),
    ({"position_embedding_type": "relative_key"}, "only 'absolute' is implemented"),
])
def test_config_fields_are_validated(tmp_path, change, says):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, **change}))
    with pytest.raises(ValueError) as e:
        BertConfig.from_json(path)
    assert says in str(e.value) and str(path) in str(e.value)


def test_config_files_that_are_not_a_config(tmp_path):
    for text in ("[1, 2]", "{", '{"hidden_size": 1e999}', "[" * 100_000 + "]" * 100_000, ""):
        (tmp_path / "c.json").write_text(text)
        with pytest.raises(ValueError, match="not a usable BERT config"):
            BertConfig.from_json(tmp_path / "c.json")
    assert BertConfig.from_json(ROOT / "tests/tiny_config.json").hidden_size == 32


def test_a_bad_config_is_one_line_at_export_and_at_conversion(home, tmp_path):
    """Export refuses it before torch loads and writes nothing; conversion and every loader read the exported
    config through the same check (the issue's layer_norm_eps -1 wrote torch results, then Paddle crashed)."""
    before = snapshot(home)
    (tmp_path / "bad.json").write_text(json.dumps({**TINY, "layer_norm_eps": -1, "num_hidden_layers": -1}))
    line = error_line(run(EXPORT, "--random_init", "--config", tmp_path / "bad.json", home=home, check=2))
    assert "layer_norm_eps must be" in line and "num_hidden_layers must be" in line and "correct it" in line
    config = home / "weights/config.json"
    config.write_text(json.dumps({**TINY, "num_attention_heads": 0}))
    line = error_line(run("weights/torch2paddle.py", home=home, check=2))
    assert "num_attention_heads must be" in line and "run `python weights/torch_bert_weights.py` again" in line
    assert snapshot(home) == {**before, config: config.read_bytes()}


def test_loaders_validate_the_exported_config(home, monkeypatch):
    from bert_sst2.twins import weights
    monkeypatch.setenv("BERT_ALIGN_HOME", str(home))
    (home / "weights/config.json").write_text(json.dumps({**TINY, "hidden_act": "swish"}))
    for load in (weights.load_config, inputs.fake_batch, inputs.padded_batch):
        with pytest.raises(PipelineError, match="hidden_act 'swish'"):
            load()


# ---------------------------------------------------------------------------------------- vocabulary

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.mark.parametrize("tokens, says", [
    (["[PAD]", "[UNK]", "[SEP]", "[MASK]", "the"], "[CLS] missing"),
    (["[PAD]", "[CLS]", "[SEP]", "[MASK]", "the"], "[UNK] missing"),
    (["[UNK]", "[CLS]", "[SEP]", "the"], "[PAD] missing"),
    ([], "it is empty"),
    (SPECIAL + [f"w{i}" for i in range(40)], "it has 45 tokens, the model's vocab_size is 40"),  # hostile
])
def test_vocab_is_validated(tmp_path, tokens, says):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in tokens))
    with pytest.raises(ValueError) as e:
        read_vocab(path, BertConfig(**{**TINY, "vocab_size": 40}))
    assert says in str(e.value) and str(path) in str(e.value)


def test_vocab_not_utf8_and_a_good_one(tmp_path):
    (tmp_path / "vocab.txt").write_bytes(b"[PAD]\n\xff\xfe\n")
    with pytest.raises(ValueError, match="not a readable vocab.txt"):
        read_vocab(tmp_path / "vocab.txt", BertConfig(**TINY))
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL + ["the"]))
    assert len(read_vocab(tmp_path / "vocab.txt", BertConfig(**TINY))) == 6
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")  # no [MASK]: both tokenizers encode
    assert len(read_vocab(tmp_path / "vocab.txt", BertConfig(**TINY))) == 5
    # hostile, and fine: a token listed twice (both tokenizers take the later id), Windows line endings (both
    # read universal newlines), a token holding \x1c
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL + ["the", "cat", "the"]))
    assert len(read_vocab(tmp_path / "vocab.txt", BertConfig(**TINY))) == 8
    (tmp_path / "vocab.txt").write_bytes(b"".join(t.encode() + b"\r\n" for t in SPECIAL + ["a\x1cb"]))
    assert read_vocab(tmp_path / "vocab.txt", BertConfig(**TINY))[-1] == "a\x1cb"


def test_bad_vocab_is_one_line_before_anything_is_written(home, tmp_path, monkeypatch):
    """The exported vocab is checked by gen_fake_data (before it writes) and by both tokenizers' loaders
    (twins.weights.vocab); a --model_dir's by the export (the issue: without [CLS] Step 2 and 5 ran green)."""
    from bert_sst2.twins import weights
    vocab = home / "weights/vocab.txt"
    vocab.write_text("".join(t + "\n" for t in vocab.read_text().splitlines() if t != "[UNK]"))
    before = snapshot(home)
    line = error_line(run("fake_data/gen_fake_data.py", home=home, check=2))
    assert "vocab.txt: not a usable BERT vocabulary: [UNK] missing" in line and "torch_bert_weights.py` again" in line
    assert snapshot(home) == before
    monkeypatch.setenv("BERT_ALIGN_HOME", str(home))
    vocab.write_text("")
    with pytest.raises(PipelineError, match="it is empty"):
        weights.vocab()
    model_dir = tmp_path / "bert"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(TINY))
    (model_dir / "vocab.txt").write_text("[PAD]\n[UNK]\nthe\n")
    line = error_line(run(EXPORT, "--model_dir", model_dir, home=home, check=2))
    assert "[CLS], [SEP] missing" in line and line.endswith("pass a BERT folder with its vocab.txt as --model_dir")


# ---------------------------------------------------------------------------------------- input ids

def test_input_ids_are_checked_against_the_model(home, monkeypatch):
    monkeypatch.setenv("BERT_ALIGN_HOME", str(home))
    ids = np.load(home / "fake_data/fake_data.npy")
    cases = [(ids + 30522, "input_ids outside [0, 30522)"), (-ids, "input_ids outside [0, 30522)"),
             (np.ones((4, 640), "int64"), "640 tokens, more than max_position_embeddings 512"),
             (np.ones((4, 0), "int64"), "expected [batch >= 1, length >= 1]")]  # hostile: no tokens
    for bad, says in cases:
        np.save(home / "fake_data/fake_data.npy", bad)
        with pytest.raises(PipelineError) as e:
            inputs.fake_batch()
        assert "fake_data.npy: " in str(e.value) and says in str(e.value)
    np.save(home / "fake_data/fake_data.npy", ids)
    np.save(home / "fake_data/fake_label.npy", np.array([0, 1, 2, 0]))  # hostile: a label the head has not
    with pytest.raises(PipelineError, match=r"each must be in \[0, 2\)"):
        inputs.fake_batch()
    padded = fileio.load_npy(home / "fake_data/fake_padded.npy")
    for bad, says in (({k: v for k, v in padded.items() if k != "attention_mask"}, "without its mask"),
                      ({**padded, "token_type_ids": padded["token_type_ids"] + 2}, "token_type_ids outside [0, 2)"),
                      ({**padded, "attention_mask": padded["attention_mask"][:, :3]}, "attention_mask has shape")):
        fileio.save_npy(home / "fake_data/fake_padded.npy", bad)
        with pytest.raises(PipelineError) as e:
            inputs.padded_batch()
        assert says in str(e.value) and "gen_fake_data.py` again" in str(e.value)


def test_fake_data_fits_a_model_with_few_positions(home, monkeypatch):
    """Hostile: a model with 32 positions once got 64-token fake data, which the ids check then refused forever."""
    (home / "weights/config.json").write_text(json.dumps({**TINY, "max_position_embeddings": 32}))
    run("fake_data/gen_fake_data.py", home=home, check=0)
    monkeypatch.setenv("BERT_ALIGN_HOME", str(home))
    assert inputs.fake_batch()[0].shape == (4, 32) and inputs.padded_batch()["input_ids"].shape[1] <= 32


def test_out_of_range_ids_are_one_line_in_a_step(home):
    np.save(home / "fake_data/fake_data.npy", np.full((4, 64), 40000, "int64"))
    before = snapshot(home)
    assert "input_ids outside [0, 30522)" in error_line(run("pipeline/Step3/pt_loss.py", home=home, check=2))
    assert snapshot(home) == before


# ---------------------------------------------------------------------------------------- weights

def test_weights_errors_are_one_line_naming_their_file(home, monkeypatch):
    from bert_sst2.twins import weights
    import torch
    monkeypatch.setenv("BERT_ALIGN_HOME", str(home))
    body = (home / "weights/torch_weight.bin").read_bytes()
    (home / "weights/torch_weight.bin").write_bytes(b"")  # the issue: the formatter crashed on an empty message
    with pytest.raises(PipelineError, match=r"torch_weight.bin is not a torch file this project wrote \(EOFError\)"):
        weights.torch_model()
    (home / "weights/torch_weight.bin").write_bytes(body)
    head = home / "classifier_weights/classifier_weights.bin"
    torch.save({"classifier.weight": torch.zeros(3, 32), "classifier.bias": torch.zeros(3)}, head)
    with pytest.raises(PipelineError, match=r"classifier_weights.bin does not fit the model; shape mismatch"):
        weights.torch_model(head=True)  # body and head checked apart: the head's own path is named
    torch.save({"classifier.weight": torch.zeros(2, 32, dtype=torch.float64), "classifier.bias": torch.zeros(2)}, head)
    with pytest.raises(PipelineError, match="classifier_weights.bin: classifier.weight is float64, not float32"):
        weights.torch_model(head=True)
    torch.save({"classifier.weight": torch.zeros(2, 32, dtype=torch.bfloat16), "classifier.bias": torch.zeros(2)},
               head)  # hostile: a dtype numpy cannot even hold
    with pytest.raises(PipelineError, match="classifier.weight is bfloat16, not float32"):
        weights.torch_model(head=True)
    pdparams = home / "weights/paddle_weight.pdparams"
    state = weights.load_paddle_arrays(pdparams, "x")
    name = next(iter(state))
    state[name] = state[name].astype("float64")  # the issue: an AssertionError inside Paddle
    pdparams.write_bytes(pickle.dumps(state, protocol=4))
    with pytest.raises(PipelineError, match=f"paddle_weight.pdparams: {name} is float64, not float32"):
        weights.check_arrays(weights.load_paddle_arrays(pdparams, "x"), pdparams, "x")
    state[name] = np.full_like(state[name], np.nan, dtype="float32")  # hostile: NaN weights
    pdparams.write_bytes(pickle.dumps(state, protocol=4))
    with pytest.raises(PipelineError, match="holds NaN or Inf"):
        weights.check_arrays(weights.load_paddle_arrays(pdparams, "x"), pdparams, "x")


class Payload:
    def __reduce__(self):
        return (os.system, ("true",))


def test_weights_only_refusal_reads_as_a_refusal(tmp_path):
    """torch's text opens with advice to turn the protection off and carries ANSI codes; ours names the refusal."""
    from bert_sst2.twins import weights
    import torch
    torch.save({"w": Payload()}, tmp_path / "zip.bin")
    (tmp_path / "legacy.bin").write_bytes(pickle.dumps({"w": Payload()}))
    torch.save({"w": np.ones(2)}, tmp_path / "numpy.bin")  # the branch whose text carries ANSI bold codes
    for name in ("zip.bin", "legacy.bin", "numpy.bin"):
        with pytest.raises(PipelineError) as e:
            weights.load_torch_tensors(tmp_path / name, "python weights/torch_bert_weights.py")
        text = str(e.value)
        assert "weights_only loader refused it" in text and "\x1b" not in text and "\n" not in text
        assert "weights_only=False" not in text and "will likely succeed" not in text, text


# ---------------------------------------------------------------------------------------- seeds, flags, messages

def test_bad_seeds_are_one_line(home):
    before = snapshot(home)
    for script, seed in (("fake_data/gen_fake_data.py", "-1"), ("classifier_weights/generate_classifier_weights.py",
                                                                 "-1"), (EXPORT, str(2 ** 32))):  # the last: hostile
        assert f"--seed must be a whole number in [0, {flags.MAX_SEED}]" in error_line(run(script, f"--seed={seed}", home=home, check=2))
    assert snapshot(home) == before


def test_every_parser_refuses_abbreviations():
    """argparse would take `--epoch 2` for `--epochs 2`: every script's parser is built with allow_abbrev=False."""
    parsers = []
    for path in ENTRY_SCRIPTS + [ROOT / "bert_sst2/flags.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "ArgumentParser":
                parsers.append((path.name, any(k.arg == "allow_abbrev" and k.value.value is False
                                               for k in node.keywords)))
    assert len(parsers) >= len(ENTRY_SCRIPTS) - 2 and all(ok for _, ok in parsers), parsers
    from bert_sst2.twins import train
    with pytest.raises(SystemExit):
        train.parse_args("torch", ["--demo", "--epoch", "2"])


def test_without_the_venv_every_script_says_to_activate_it(tmp_path):
    """Without the venv `import portcheck.core.runtime` itself fails (-S: no site-packages, as a bare python)."""
    for script in ENTRY_SCRIPTS:
        proc = subprocess.run([sys.executable, "-S", "-I", str(script), "--help"], cwd=tmp_path,
                              capture_output=True, text=True)
        assert proc.returncode == 1 and proc.stdout == "", (script, proc.stderr)
        assert proc.stderr.strip().splitlines() == [
            "error: this project's packages are not importable: activate its venv (. .venv/bin/activate) "
            "or run `pip install -r requirements.txt`"], (script, proc.stderr)


def test_messages(tmp_path):
    """A folder is not 'not found'; advice is said as advice, a command as `run ... first`; a NaN curve is
    placed at its first step."""
    (tmp_path / "weights.bin").mkdir()
    with pytest.raises(PipelineError, match="weights.bin is a folder, not a file: run `python x.py` first"):
        errors.require(tmp_path / "weights.bin", "python x.py")
    with pytest.raises(PipelineError, match=r"nothing.json not found: pass a BERT folder as --model_dir \[PC002\]$"):
        errors.require(tmp_path / "nothing.json", "pass a BERT folder as --model_dir")
    with pytest.raises(PipelineError, match="is a folder, not a file"):
        fileio.load_npy(tmp_path / "weights.bin")
    check5 = load_script(ROOT / "pipeline/Step5/check_step5.py")
    t = np.ones(100, "float32")
    p = t.copy()
    p[63:] = np.nan
    assert check5.loss_gap("loss", t, p, 1e-3) == "per-step loss: max diff 0.000e+00 at step 1; not finite from step 64"


def test_weight_stats_advice_exists(tmp_path):
    """weight_stats has no --resume: a bad checkpoint is met with advice that fits it."""
    (tmp_path / "torch_state.pt").write_bytes(b"garbage")
    proc = run("pipeline/Step5/weight_stats.py", "--torch", tmp_path, "--paddle", tmp_path, home=tmp_path, check=2)
    line = error_line(proc)
    assert "torch_state.pt" in line and "--resume" not in line and "train again" in line
    line = error_line(run("pipeline/Step5/weight_stats.py", "--torch", tmp_path / "torch_state.pt", home=tmp_path,
                          check=2))  # hostile: a file where a folder belongs
    assert "is a file: pass a checkpoint folder" in line


def test_export_remedies_read_as_sentences(home, tmp_path):
    line = error_line(run(EXPORT, "--model_dir", tmp_path, home=home, check=2))
    assert "config.json not found: pass a BERT folder (config.json, vocab.txt, weights) as --model_dir" in line
    assert "run `pass" not in line


# ---------------------------------------------------------------------------------------- Ctrl-C

def test_an_error_quoting_a_newline_is_still_one_line(capsys):
    """Hostile: a weights key named "a\nerror: forged" would otherwise print as two lines."""
    def main():
        raise PipelineError("x.bin has keys a\nerror: forged\x1b[1m")
    with pytest.raises(SystemExit) as e:
        errors.run_main(main)
    assert e.value.code == 2 and capsys.readouterr().err == "error: x.bin has keys a\\nerror: forged\\x1b[1m\n"


def test_ctrl_c_outside_training_is_one_line(capsys):
    def main():
        raise KeyboardInterrupt
    with pytest.raises(SystemExit) as e:
        errors.run_main(main)
    assert e.value.code == 130
    assert capsys.readouterr().err.startswith("error: interrupted (Ctrl-C)")


def test_ctrl_c_while_a_script_imports_is_one_line():
    """Before run_main: portcheck.runtime's excepthook (here a KeyboardInterrupt where `import torch` would be)."""
    proc = subprocess.run([sys.executable, "-c", "import portcheck.core.runtime\nraise KeyboardInterrupt"],
                          capture_output=True, text=True, cwd="/tmp")
    assert proc.returncode == 130 and proc.stderr.splitlines() == [
        "error: interrupted (Ctrl-C) while loading; nothing was written, run the command again [PC004]"]
    proc = subprocess.run([sys.executable, "-c", "import portcheck.core.runtime\nimport no_such_package_29"],
                          capture_output=True, text=True, cwd="/tmp")
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        "error: No module named 'no_such_package_29': activate the project's venv (. .venv/bin/activate) or run "
        "`pip install -r requirements.txt` [PC005]"]


def test_ctrl_c_in_training_says_where_and_resume_continues(home):
    """SIGINT during a training: one line naming the step and the checkpoint --resume continues from, exit 130,
    the checkpoint intact (the demo set is 2 steps an epoch; a checkpoint closes each epoch)."""
    script = ROOT / "pipeline/Step5/pt_train.py"
    env = dict(os.environ, BERT_ALIGN_HOME=str(home), PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, str(script), "--demo", "--epochs", "500", "--log_every", "1",
                             "--deterministic"], env=env, cwd="/tmp", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stdout:
        if "step 5/" in line:
            break
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    line = error_line(subprocess.CompletedProcess([], 130, "", stderr))
    assert line.startswith("error: interrupted at step ") and "; `--resume` continues from checkpoint-" in line
    step = int(line.split("checkpoint-")[1])
    out = home / "pipeline/Step5/output/torch"
    assert (out / "latest").read_text().strip() == f"checkpoint-{step}"
    assert (out / f"checkpoint-{step}/torch_state.pt").is_file()


def test_run_all_marks_the_interrupted_step(tmp_path, monkeypatch):
    run_all = load_script(ROOT / "pipeline/run_all.py")
    monkeypatch.setenv("BERT_ALIGN_HOME", str(tmp_path))

    def fake_run(cmd, root):
        if "Step5" in cmd[0]:
            raise KeyboardInterrupt
        return 0, 0.0, cmd
    from portcheck.pipeline import steps as runner
    monkeypatch.setattr(runner, "run_script", fake_run)
    steps = run_all.steps
    monkeypatch.setattr(run_all, "steps", lambda args: [dataclasses.replace(s, checks=()) for s in steps(args)])
    monkeypatch.setattr(sys, "argv", ["run_all.py", "--one_at_a_time", "--max_steps", "2"])
    with pytest.raises(errors.Interrupted, match="interrupted in Step5 training"):
        run_all.main()
    summary = (tmp_path / "log_reprod/SUMMARY.md").read_text()
    assert "| Step5 training (SMOKE RUN on demo data: not evidence) | interrupted |" in summary
    assert "| Step4 lr + backward | done |" in summary


# ---------------------------------------------------------------------------------------- run_all, Step 5

def test_run_all_reads_every_row_before_any_step(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("sentence\tlabel\nfine\t1\n")
    (data / "dev.tsv").write_text("sentence\tlabel\ngood\t1\nbad\t2\n")
    home = tmp_path / "home"
    line = error_line(run("pipeline/run_all.py", "--data_dir", data, home=home, check=2))
    assert "dev.tsv:3: label must be 0 or 1, got '2'" in line
    (tmp_path / "bert").mkdir()  # hostile: a --model_dir whose config cannot build the model, refused up front too
    (tmp_path / "bert/config.json").write_text(json.dumps({**TINY, "hidden_act": "mish"}))
    line = error_line(run("pipeline/run_all.py", "--model_dir", tmp_path / "bert", home=home, check=2))
    assert "hidden_act 'mish'" in line
    assert not home.exists()


def test_step5_refuses_a_missing_data_dir_before_a_framework_loads(tmp_path):
    from bert_sst2.twins import train
    with pytest.raises(PipelineError, match="train.tsv not found"):
        train.parse_args("torch", ["--data_dir", str(tmp_path / "nowhere")])  # in validate(): before any import


def test_summary_keeps_indented_lines():
    run_all = load_script(ROOT / "pipeline/run_all.py")
    verdict = {"passed": True, "keys": [], "findings": [],
               "notes": ["worst 5 gradients (max / allowed):", "\tgrad_a: 1e-3 / 2e-3 = 0.50"]}
    lines = run_all.brief(verdict)
    assert lines[:2] == ["worst 5 gradients (max / allowed):", "    grad_a: 1e-3 / 2e-3 = 0.50"]


@pytest.mark.parametrize("tool", ["formers", "formers_generating"])
def test_the_formers_zoo_outside_its_venv_prints_its_help_and_says_which_venv_it_needs(tmp_path, tool):
    if importlib.util.find_spec("paddleformers") is not None:
        pytest.skip("the PaddleFormers venv: the zoo runs here")
    run = lambda *flags: subprocess.run([sys.executable, "-m", f"tools.zoo.{tool}", *flags], cwd=ROOT,
                                        capture_output=True, text=True)
    helped = run("--help")
    assert helped.returncode == 0 and helped.stdout.startswith(f"usage: {tool}.py"), helped.stderr
    refused = run("--only", "llama")
    assert refused.returncode == 1 and refused.stdout == "" and refused.stderr.strip().splitlines() == [
        "error: paddleformers is not installed in this venv: run this in the PaddleFormers venv (README: Set up), "
        f".venv-formers/bin/python -m tools.zoo.{tool}"], refused.stderr
