"""`python -m portcheck run` on scripts as users write them beyond a plain loop: transformers' Trainer against
paddlenlp's (examples/scripts/pt_trainer.py, pd_trainer.py) and a loop keeping an EMA copy of its model (pt_ema.py,
pd_ema.py); `portcheck check` on each hand-in exits as `run` did.

The torch sides of a pair run once (module fixtures); each Paddle script, clean or planted, runs alone against them
(run.run_side, run.judge: what `run` does after the scripts), as tests/test_run_scripts.py does."""
import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from portcheck.core.keys import ROOT as MODEL
from portcheck.core.report import DIAGNOSTICS
from portcheck.scripts import fed, run, runconfig

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "examples" / "scripts"
STEPS = 2
# Paddle's pad row gradient on the masked pads: rounding noise, whose digits move between CPUs; docs/run.md says
# this bound, which the noise is under by orders of magnitude (1e-31 to 1e-32 measured)
PAD_NOISE = 1e-30


def planted_trainer(folder: Path, plants) -> Path:
    """The Paddle Trainer script with each (line, planted) of plants, in folder."""
    text = (SCRIPTS / "pd_trainer.py").read_text()
    for line, plant in plants:
        assert text.count(line) == 1, f"the plant's line is not in pd_trainer.py once: {line}"
        text = text.replace(line, plant)
    path = folder / "pd_trainer.py"
    path.write_text(text)
    return path


def every_side(out: Path, argv: dict, steps: int) -> dict:
    """Every run of `portcheck run` (the torch64 run reads the Paddle run's pairing): {side: its status}."""
    run.prepare(out)
    return {side: run.run_side(side, argv[fw], out, steps) for side, fw in run.SIDES}


def paddle_against(done, tmp_path: Path, argv, steps: int):
    """(exit code, summary, hand-in folder) of the Paddle command (None: the one the fixture ran) judged against the
    torch sides' records."""
    out, statuses = done
    mine = tmp_path / "out"
    shutil.copytree(out, mine)
    if argv is not None:
        statuses = {**statuses, "paddle": run.run_side("paddle", argv, mine, steps)}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run.judge(mine, statuses, steps)
    return code, printed.getvalue(), mine / "log_reprod"


def check(folder: Path, process=False):
    """`portcheck check --only config,<run's pairs> folder`: (exit code, its output). process=True: the command as a
    user runs it (one test here: the others run its main in this process, the same lines without an interpreter's
    start-up and imports each time, ~1 s)."""
    argv = ["check", str(folder), "--only", ",".join((runconfig.CONFIG, *run.PAIRS))]
    if process:
        p = subprocess.run([sys.executable, "-m", "portcheck", *argv], capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr
    from portcheck import cli
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), pytest.raises(SystemExit) as e:
        cli.main(argv)
    return e.value.code, printed.getvalue()


@pytest.fixture(scope="module")
def trainer_torch(tmp_path_factory):
    """The Trainer scripts as written, every side (the Paddle run: the clean one judged below)."""
    tmp = tmp_path_factory.mktemp("trainer")
    argv = {fw: [sys.executable, str(SCRIPTS / name), "--output-dir", str(tmp / fw)]
            for fw, name in (("torch", "pt_trainer.py"), ("paddle", "pd_trainer.py"))}
    return tmp / "out", every_side(tmp / "out", argv, STEPS)


def test_the_trainers_are_judged_as_a_plain_loop(trainer_torch, tmp_path):
    """The scripts as written: each Trainer shuffles with its own sampler, Paddle's given torch's order. Root model,
    optimizer (AdamW, no decay on biases and LayerNorms), clipping, warmup-linear schedule found inside both
    Trainers: green, the hand-in too. transformers' pad_token_id 0 (padding_idx; paddlenlp's has none) measured on
    the masked pads: green."""
    code, said, folder = paddle_against(trainer_torch, tmp_path, None, STEPS)
    assert code == 0 and "the root models: torch BertForSequenceClassification, paddle BertForSequenceClassification" \
        in said and "green: the same run" in said, said
    assert "(data: Paddle's RandomSampler given torch's RandomSampler order for the 2 step(s))" in said, said
    assert "DIFFERS bert.embeddings.word_embeddings (Embedding): padding_idx torch 0 vs paddle none; measured here: " \
        "the pad row's gradient differs by" in said and "within the rule: green on these batches" in said, said
    pad = json.loads((folder / DIAGNOSTICS / f"{runconfig.CONFIG}_torch.json").read_text())["measured"]
    assert [m["module"] for m in pad] == ["bert.embeddings.word_embeddings"] and pad[0]["passed"], pad
    assert pad[0]["largest"][0] == 0 and pad[0]["gap"] == pad[0]["largest"][1] < PAD_NOISE, pad
    for doc, heading, under in (("run.md", "## The Trainers", "under"), ("run_cn.md", "## 两个 Trainer", "小于")):
        text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
        section = text[text.index(f"\n{heading}\n") + 1:]
        section = section[:section.index("\n## ")]  # the paragraph and the defaults' table say the bound
        said = [line for line in section.splitlines() if f"{PAD_NOISE:g}" in line]
        assert len(said) == 2 and all(f"{under} {PAD_NOISE:g}" in line for line in said), (doc, said)
    config = {side: json.loads((tmp_path / "out" / side / "status.json").read_text())["config"]
              for side in ("torch", "paddle")}
    assert config["torch"]["clip"] == config["paddle"]["clip"] == {"kind": "global_norm", "bound": 1.0}
    assert config["torch"]["trainer"]["max_steps"] == 8 and config["torch"]["trainer"]["warmup_steps"] == 2
    decayed = {k for k, (v, _) in config["torch"]["optimizer"]["weight_decay"].items() if v}
    assert "bert.embeddings.word_embeddings.weight" in decayed and not any("bias" in k or "LayerNorm" in k
                                                                          for k in decayed)
    checked, out = check(folder, process=True)
    assert checked == 0 and "config: green" in out, out


def test_a_collator_putting_the_labels_first_is_the_same_run(trainer_torch, tmp_path):
    """The Paddle dataset's column named `label`, as GLUE's is: paddlenlp's collator renames it `labels` and puts it
    first, transformers' batch keeps it last. The same named arguments, every value equal: green, the hand-in too
    (before, each pair was `NOT the same run (inputs differs ...)`: the run records bound the model's first argument
    by place, torch's input_ids against Paddle's labels)."""
    script = planted_trainer(tmp_path, [('"labels": int(labels[i])}', '"label": int(labels[i])}')])
    code, said, folder = paddle_against(trainer_torch, tmp_path, [sys.executable, str(script), "--output-dir",
                                                                  str(tmp_path / "pd")], STEPS)
    assert code == 0 and "green: the same run" in said, said
    checked, out = check(folder)
    assert checked == 0 and "NOT the same run" not in out, out
    # by name: a Paddle argument torch's batch lacks (it was not fed torch's) still binds another input
    from portcheck.core.record import fingerprint
    t = {"input/batch_0/kwargs/input_ids": np.ones((2, 3), np.int64), "input/batch_0/kwargs/labels": np.zeros(2)}
    p = dict(reversed(t.items()))
    assert fingerprint(fed.first_input(p, t)) == fingerprint(fed.first_input(t, t))
    p["input/batch_0/kwargs/token_type_ids"] = np.zeros((2, 3), np.int64)
    assert fingerprint(fed.first_input(p, t)) != fingerprint(fed.first_input(t, t))


# the Trainers' settings left unequal on the Paddle side, each its own configuration line
TRAINER_PLANTS = [
    ("max_grad_norm=1.0,", "max_grad_norm=0.5,", "gradient clipping: torch global_norm 1 vs paddle global_norm 0.5"),
    ("weight_decay=0.01,", "weight_decay=0.0,", "optimizer: weight decay of bert.embeddings.word_embeddings.weight "
                                                "torch 0.01 (decoupled) vs paddle 0 (decoupled)"),
    ("warmup_steps=2,", "warmup_steps=3,", "trainer: warmup_steps torch 2 vs paddle 3"),
    ("num_train_epochs=args.epochs,", "", "trainer: max_steps torch 8 vs paddle 4"),  # paddlenlp's default: 1 epoch
]


def test_trainer_settings_left_unequal_are_red_and_named(trainer_torch, tmp_path):
    plants = [(line, planted) for line, planted, _ in TRAINER_PLANTS]
    argv = [sys.executable, str(planted_trainer(tmp_path, plants)), "--output-dir", str(tmp_path / "pd")]
    code, said, folder = paddle_against(trainer_torch, tmp_path, argv, STEPS)
    # + the lr line, and the padding_idx line measured red: the planted weight decay moves the same weights
    assert code == 1 and f"RED: {len(TRAINER_PLANTS) + 2} configuration difference(s)" in said, said
    assert "padding_idx torch 0 vs paddle none; measured here" in said and "red on these batches" in said, said
    for _, _, named in TRAINER_PLANTS:
        assert f"DIFFERS {named}" in said, said
    assert "DIFFERS scheduler: lr over the 2 steps torch [0.0, 0.0005] vs paddle [0.0, 0.000333333]" in said, said
    checked, out = check(folder)  # the folder alone says every line run said, the measured one too
    assert checked == 1 and f"config: RED | {len(TRAINER_PLANTS) + 2} configuration difference(s)" in out, out
    for _, _, named in TRAINER_PLANTS:
        assert f"DIFFERS {named}" in out, out
    assert "padding_idx torch 0 vs paddle none; measured here" in out and "red on these batches" in out, out


def test_a_trainers_label_smoothing_is_named():
    """transformers' Trainer smooths labels outside the model (label_smoothing_factor), paddlenlp's never does."""
    same = {"label_smoothing": 0.0, "max_steps": 8}
    lines = runconfig.differences({"trainer": {**same, "label_smoothing": 0.1}}, {"trainer": same}, {}, {})
    assert lines == [f"trainer: label_smoothing torch 0.1 vs paddle 0 ({runconfig.TRAINER['label_smoothing']})"]


def test_an_attention_dropout_given_as_a_number_is_compared_with_torchs(trainer_torch, tmp_path):
    """paddlenlp's BERT hands attention_probs_dropout_prob to nn.MultiHeadAttention as a float (F.dropout inside);
    transformers' drops the probabilities in BertSelfAttention (its dropout_p to scaled_dot_product_attention), a
    module paired with none of Paddle's: 0.1 against 0.0 was green. Now gathered at the layer both pair: red, one
    line per layer naming both sides' values and modules; check re-derives it from the folder."""
    script = planted_trainer(tmp_path, [("num_labels=3, type_vocab_size=2)",
                                         "num_labels=3, type_vocab_size=2, attention_probs_dropout_prob=0.0)")])
    code, said, folder = paddle_against(trainer_torch, tmp_path, [sys.executable, str(script), "--output-dir",
                                                                  str(tmp_path / "pd")], STEPS)
    line = ("DIFFERS bert.encoder.layer.{i}: attention dropout p torch 0.1 vs paddle none (torch's attention.self "
            "(BertSdpaSelfAttention); paddle's none; off for the steps, so compared here)")
    assert code == 1 and all(line.format(i=i) in said for i in (0, 1)), said
    checked, out = check(folder)
    assert checked == 1 and line.format(i=0) in out, out


def test_an_attention_dropout_module_against_a_number_is_one_line():
    """transformers' eager BertSelfAttention drops its probabilities with an nn.Dropout module (recorded as an
    attention dropout: its input's rows sum to 1), paddlenlp's MultiHeadAttention with F.dropout of its float."""
    import torch
    from portcheck.scripts.arguments import probabilities
    modules = {"bert.encoder.layer.0": "bert.encoder.layers.0", MODEL: MODEL}
    torch_config = {"attention_dropouts": {"bert.encoder.layer.0.attention.self.dropout": {"type": "Dropout",
                                                                                           "p": 0.0}}}
    paddle_config = {"dropouts": {"bert.encoder.layers.0.self_attn": {"type": "MultiHeadAttention", "p": [0.1],
                                                                      "attention": True}}}
    assert runconfig.differences(torch_config, paddle_config, modules, {}) == [
        "bert.encoder.layer.0: attention dropout p torch 0 vs paddle 0.1 (torch's attention.self.dropout (Dropout); "
        "paddle's self_attn (MultiHeadAttention); off for the steps, so compared here)"]
    torch_config["attention_dropouts"]["bert.encoder.layer.0.attention.self.dropout"]["p"] = 0.1
    assert runconfig.differences(torch_config, paddle_config, modules, {}) == []
    weights = np.exp(np.random.default_rng(0).normal(size=(2, 2, 5, 5)))
    assert probabilities(torch.from_numpy(weights / weights.sum(-1, keepdims=True))) and \
        not probabilities(torch.from_numpy(weights))


def test_an_attention_dropout_of_zero_is_said_as_zero():
    """transformers' BertSdpaSelfAttention with attention_probs_dropout_prob=0.0 calls its attention with dropout_p
    0.0: that call went unrecorded and printed as "torch none", as if it had no dropout. Now recorded: "torch 0"; a
    paired module's 0 against no call on the other side stays no line."""
    from types import SimpleNamespace
    from portcheck.scripts.first_call import dropout_site
    site = object()
    fake = SimpleNamespace(stack=[site], names={id(site): "bert.encoder.layer.0.attention.self"}, config={},
                           fw=SimpleNamespace(is_dropout=lambda m: False))
    dropout_site(fake, 0.0, attention=True)
    modules = {"bert.encoder.layer.0": "bert.encoder.layers.0", "": ""}
    paddle_config = {"dropouts": {"bert.encoder.layers.0.self_attn": {"type": "MultiHeadAttention", "p": [0.1],
                                                                      "attention": True}}}
    assert runconfig.differences(fake.config, paddle_config, modules, {}) == [
        "bert.encoder.layer.0: attention dropout p torch 0 vs paddle 0.1 (torch's attention.self (object); "
        "paddle's self_attn (MultiHeadAttention); off for the steps, so compared here)"]
    paired = {"dropouts": {"bert.encoder.layer.0": {"type": "Layer", "p": [0.0], "attention": True}}}
    assert runconfig.differences(paired, {}, modules, {}) == []
    assert runconfig.differences(paired, paddle_config, modules, {}) == [  # the paired module's own 0 hides nothing
        "bert.encoder.layer.0: attention dropout p torch 0 vs paddle 0.1 (torch's bert.encoder.layer.0 (Layer); "
        "paddle's self_attn (MultiHeadAttention); off for the steps, so compared here)"]


EMA_STEPS = 3


@pytest.fixture(scope="module")
def ema_torch(tmp_path_factory):
    out = tmp_path_factory.mktemp("ema") / "out"
    argv = {fw: [sys.executable, str(SCRIPTS / name)] for fw, name in (("torch", "pt_ema.py"), ("paddle", "pd_ema.py"))}
    return out, every_side(out, argv, EMA_STEPS)


def test_an_ema_copy_is_judged_as_the_weights(ema_torch, tmp_path):
    code, said, folder = paddle_against(ema_torch, tmp_path, None, EMA_STEPS)
    assert code == 0 and "kept beside the model (ema), as the weights: every tensor within the measured rule " \
        "after each step (8 compared)" in said, said
    checked, out = check(folder)
    assert checked == 0, out
    # the configuration entry is bound to its run: an edited file is red, never read as the run's
    edited = folder / "diagnostics" / "config_paddle.json"
    edited.write_text(edited.read_text().replace('"lr": 0.01', '"lr": 0.02'))
    checked, out = check(folder)
    assert checked == 1 and "config: RED | config_paddle.json is not the file its run record" in out, out


def test_an_ema_decay_planted_is_red_and_named(ema_torch, tmp_path):
    script = tmp_path / "pd_ema.py"
    script.write_text((SCRIPTS / "pd_ema.py").read_text().replace('"--decay", type=float, default=0.999',
                                                                  '"--decay", type=float, default=0.99'))
    code, said, folder = paddle_against(ema_torch, tmp_path, [sys.executable, str(script)], EMA_STEPS)
    assert code == 1 and "kept beside the model (ema), as the weights: RED" in said and \
        "RED: what the script keeps beside the model differs: ema: fc1.weight after step 1" in said, said
    checked, out = check(folder)  # its digest in bp_align: the folder alone is red
    assert checked == 1 and "bp_align: RED" in out and "kept_1" in out, out


def test_a_module_kept_on_one_side_only_is_a_configuration_line():
    """An EMA copy the Paddle script does not keep: one line, which check re-derives from the two records."""
    assert runconfig.differences({"kept": {"ema": "Net"}}, {"kept": {}}, {}, {}) == [
        "kept beside the model: torch ema (Net) vs paddle none"]
    assert runconfig.kept_lines({"kept": {"ema": "Net"}}, {"kept": {}}) == []


def test_a_kept_module_is_named_for_bp_align_as_run_names_it():
    """check said a kept EMA's difference only as bp_align's kept_1 (a digest without names), where run named the
    module, the object holding it and its decay: the configuration entry names it from the two records."""
    holder = {"ema.shadow": {"as": "ema.shadow", "by": "ModelEMA", "decay": 0.999}}
    torch_config = {"kept": {"ema.shadow": "Net"}, "kept_as": holder}
    paddle_config = {"kept": {"ema.shadow": "Net"}, "kept_as": {"ema.shadow": {**holder["ema.shadow"], "decay": 0.99}}}
    assert runconfig.kept_lines(torch_config, paddle_config) == [
        "bp_align's kept_<i>, the change over step i of what the script keeps beside the model: torch ema.shadow "
        "(ModelEMA, decay 0.999) vs paddle ema.shadow (ModelEMA, decay 0.99)"]
    assert runconfig.kept_lines(torch_config, torch_config)[0].endswith(": ema.shadow (ModelEMA, decay 0.999)")


# the EMA kept as a dict of tensors keyed as the model's state, as many scripts keep it: (line, its dict form)
AS_DICT = {
    "torch": [("    ema = copy.deepcopy(model)\n    for p in ema.parameters():\n        p.requires_grad_(False)\n",
               "    ema = {k: v.detach().clone() for k, v in model.state_dict().items()}\n"),
              ("            for e, p in zip(ema.parameters(), model.parameters()):\n"
               "                e.mul_(args.decay).add_(p, alpha=1 - args.decay)\n",
               "            for k, v in model.state_dict().items():\n"
               "                ema[k].mul_(args.decay).add_(v, alpha=1 - args.decay)\n"),
              ("ema(torch.from_numpy(x))", "torch.func.functional_call(model, ema, torch.from_numpy(x))")],
    "paddle": [("    ema = copy.deepcopy(model)\n    for p in ema.parameters():\n        p.stop_gradient = True\n",
                "    ema = {k: v.detach().clone() for k, v in model.state_dict().items()}\n"),
               ("            for e, p in zip(ema.parameters(), model.parameters()):\n"
                "                e.set_value(e * args.decay + p * (1 - args.decay))\n",
                "            for k, v in model.state_dict().items():\n"
                "                ema[k] = ema[k] * args.decay + v * (1 - args.decay)\n"),
               ("    with paddle.no_grad():\n        print(f\"ema acc {(ema(paddle.to_tensor(x))",
                "    model.set_state_dict(ema)\n    with paddle.no_grad():\n"
                "        print(f\"ema acc {(model(paddle.to_tensor(x))")],
}


def as_dict(folder: Path, fw: str, decay: str = "0.999") -> Path:
    name = {"torch": "pt_ema.py", "paddle": "pd_ema.py"}[fw]
    text = (SCRIPTS / name).read_text().replace('default=0.999)', f'default={decay})')
    for line, form in AS_DICT[fw]:
        assert text.count(line) == 1, line
        text = text.replace(line, form)
    (folder / name).write_text(text)
    return folder / name


def test_an_ema_kept_as_a_dict_of_tensors_is_judged_and_its_decay_planted_red(ema_torch, tmp_path):
    """Paddle's EMA a dict (gc does not track a dict of Paddle tensors: found on the script's frames) against torch's
    EMA module: paired by name, green; its decay planted red."""
    code, said, _ = paddle_against(ema_torch, tmp_path / "clean", [sys.executable, str(as_dict(tmp_path, "paddle"))],
                                   EMA_STEPS)
    assert code == 0 and "kept beside the model (ema), as the weights: every tensor within the measured rule" in said, \
        said
    planted = [sys.executable, str(as_dict(tmp_path, "paddle", "0.99"))]
    code, said, folder = paddle_against(ema_torch, tmp_path / "planted", planted, EMA_STEPS)
    assert code == 1 and "what the script keeps beside the model differs: ema: fc1.weight after step 1" in said, said
    assert check(folder)[0] == 1


def test_a_torch_dict_of_tensors_beside_the_model_is_found(tmp_path):
    """torch's side of the same: the dict is found and named, the model's own state_dict() (views of its tensors)
    and the optimizer's held parameters are not. And torch's AveragedModel (an EMA by get_ema_multi_avg_fn), which
    holds its copy of the model as .module, which gc finds too: one kept module, named as the script holds the
    AveragedModel (before, the copy also alone as ema#2, red as `kept beside the model: torch ema#2 (Sequential) vs
    paddle none` against a Paddle script's one EMA copy, found by a pair of scripts written outside the project)."""
    import torch
    from portcheck.scripts.hooks_torch import TorchSide
    from portcheck.scripts.arguments import Tensors
    from portcheck.scripts.first_call import kept_modules
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}
    views = model.state_dict()  # noqa: F841 - alive, the model's own tensors
    ema = torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.99))
    said = {}
    found = kept_modules(TorchSide(False), model, model, [opt], said)
    assert sorted(found) == ["ema", "shadow"] and found["ema"] is ema.module, found
    assert said == {"ema": {"as": "ema", "by": "AveragedModel", "decay": 0.99}, "shadow": {"as": "shadow"}}, said
    # an EMA class holding its copy as .module (timm's ModelEmaV2): named by what holds it, with its decay (before:
    # `module`, the name of the attribute alone)
    exec(compile(HELD["torch"][0][1].replace("class Net(nn.Module):", ""), "pt_ema.py", "exec"), space := {
        "nn": torch.nn, "torch": torch, "copy": __import__("copy")})
    del ema
    model_ema = space["ModelEma"](model, 0.999)
    said = {}
    found = kept_modules(TorchSide(False), model, model, [opt], said)
    assert found["model_ema.module"] is model_ema.module and \
        said["model_ema.module"] == {"as": "model_ema.module", "by": "ModelEma", "decay": 0.999}, said
    assert isinstance(found["shadow"], Tensors) and found["shadow"].held is shadow


# the EMA held by a class of the script's, as timm's ModelEmaV2 holds it (a module holding its copy as .module and
# the decay it is given): (line, its form) on each side (the torch one: a helper for a pair of one's own)
HELD = {
    "torch": [("class Net(nn.Module):",
               "class ModelEma(nn.Module):\n    def __init__(self, model, decay):\n        super().__init__()\n"
               "        self.module = copy.deepcopy(model)\n        self.decay = decay\n"
               "        for p in self.module.parameters():\n            p.requires_grad_(False)\n\n"
               "    @torch.no_grad()\n    def update(self, model):\n"
               "        for e, p in zip(self.module.parameters(), model.parameters()):\n"
               "            e.mul_(self.decay).add_(p, alpha=1 - self.decay)\n\n\nclass Net(nn.Module):"),
              ("    ema = copy.deepcopy(model)\n    for p in ema.parameters():\n        p.requires_grad_(False)\n",
               "    model_ema = ModelEma(model, args.decay)\n"),
              ("        with torch.no_grad():\n            for e, p in zip(ema.parameters(), model.parameters()):\n"
               "                e.mul_(args.decay).add_(p, alpha=1 - args.decay)\n", "        model_ema.update(model)\n"),
              ("ema(torch.from_numpy(x))", "model_ema.module(torch.from_numpy(x))")],
    "paddle": [("class Net(nn.Layer):",
                "class ModelEma(nn.Layer):\n    def __init__(self, model, decay):\n        super().__init__()\n"
                "        self.module = copy.deepcopy(model)\n        self.decay = decay\n"
                "        for p in self.module.parameters():\n            p.stop_gradient = True\n\n"
                "    @paddle.no_grad()\n    def update(self, model):\n"
                "        for e, p in zip(self.module.parameters(), model.parameters()):\n"
                "            e.set_value(e * self.decay + p * (1 - self.decay))\n\n\nclass Net(nn.Layer):"),
               ("    ema = copy.deepcopy(model)\n    for p in ema.parameters():\n        p.stop_gradient = True\n",
                "    model_ema = ModelEma(model, args.decay)\n"),
               ("        with paddle.no_grad():\n            for e, p in zip(ema.parameters(), model.parameters()):\n"
                "                e.set_value(e * args.decay + p * (1 - args.decay))\n", "        model_ema.update(model)\n"),
               ("ema(paddle.to_tensor(x))", "model_ema.module(paddle.to_tensor(x))")],
}


def held(folder: Path, fw: str, decay: str = "0.999") -> Path:
    name = {"torch": "pt_ema.py", "paddle": "pd_ema.py"}[fw]
    text = (SCRIPTS / name).read_text().replace('default=0.999)', f'default={decay})')
    for line, form in HELD[fw]:
        assert text.count(line) == 1, line
        text = text.replace(line, form)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def test_an_ema_held_by_a_class_is_named_as_held_with_its_decay(ema_torch, tmp_path):
    """The Paddle EMA held by a class of the script's, holding the copy as .module and its decay (timm's ModelEmaV2's
    form), against torch's plain copy: its decay planted 0.99 is red, the line naming the copy as each script holds
    it and the decay given (before: the torch side's name alone, `ema: fc1.weight after step 1`; a torch EMA held so
    was `module: fc1.weight`: test_a_torch_dict_of_tensors_beside_the_model_is_found holds its name)."""
    planted = [sys.executable, str(held(tmp_path, "paddle", "0.99"))]
    code, said, folder = paddle_against(ema_torch, tmp_path / "planted", planted, EMA_STEPS)
    assert code == 1 and "RED: what the script keeps beside the model differs: torch ema vs paddle model_ema.module " \
        "(ModelEma, decay 0.99): fc1.weight after step 1" in said, said
    checked, out = check(folder)  # bp_align's kept_<i> named from the hand-in's configuration records, as run names it
    assert checked == 1 and "KEPT bp_align's kept_<i>, the change over step i of what the script keeps beside the " \
        "model: torch ema vs paddle model_ema.module (ModelEma, decay 0.99)" in out, out


BN = ROOT / "tests" / "ema_bn"


@pytest.fixture(scope="module")
def ema_bn_torch(tmp_path_factory):
    out = tmp_path_factory.mktemp("ema_bn") / "out"
    return out, every_side(out, {fw: [sys.executable, str(BN / f"{p}_train.py")] for fw, p in (("torch", "pt"),
                                                                                             ("paddle", "pd"))}, 3)


def test_an_ema_following_the_models_batchnorm_statistics_is_green_and_averaging_them_red(ema_bn_torch, tmp_path):
    """torch's AveragedModel copies the model's buffers at each update: its running_var is the model's, unbiased;
    the port's EMA, copying Paddle's statistics, holds Paddle's biased one, a difference of the model's by design, said
    and judged on what is left. A port averaging the statistics as weights (Paddle holds them as parameters, so a loop
    over ema.parameters() reaches them) is red at the first running mean it moves."""
    code, said, _ = paddle_against(ema_bn_torch, tmp_path / "clean", None, 3)
    assert code == 0 and "kept beside the model (ema), as the weights: every tensor within the measured rule" in said, \
        said
    script = tmp_path / "pd_train.py"
    script.write_text((BN / "pd_train.py").read_text().replace("step == 0 or p.stop_gradient", "step == 0"))
    code, said, _ = paddle_against(ema_bn_torch, tmp_path / "planted", [sys.executable, str(script)], 3)
    assert code == 1 and "vs paddle ema: 1.running_mean after step 2" in said, said
