"""Step 4 passes on the aligned schedules and backward passes, and goes red on each planted bug."""

import importlib
import sys

import numpy as np
import pytest

from portcheck import cli
from portcheck.core.fileio import load_npy
from conftest import error_line, plant_values, private_copy, run, step_sides

S = "pipeline/Step4/"
PT_LR, PD_LR, PT_BP, PD_BP, CHECK = (S + f for f in ("pt_lr.py", "pd_lr.py", "pt_bp.py", "pd_bp.py", "check_step4.py"))


@pytest.fixture(scope="module")
def aligned(run_all_home, tmp_path_factory):
    """The tiny home with all four Step 4 outputs, aligned, as run_all.py's run of PT_LR, PD_LR, PT_BP and PD_BP
    wrote them (read-only: tests copy it)."""
    return step_sides(run_all_home, tmp_path_factory.mktemp("step4") / "home", 4, ("lr", "bp_align"))


@pytest.fixture
def copy(aligned, tmp_path):
    return private_copy(aligned, tmp_path)


def log(home, name):
    return (home / f"pipeline/Step4/{name}_diff.log").read_text()


def failed_keys(text):
    line = next(line for line in text.splitlines() if "diff check failed" in line)
    return line.split("diff check failed: ", 1)[1].split(", ")


def test_aligned_passes_and_fills_log_reprod(copy):
    proc = run(CHECK, home=copy, check=0)
    assert "lr: aligned; bp_align: aligned" in proc.stdout
    lr = log(copy, "lr")
    assert lr.count("max diff: check passed: True, value: 0.0, threshold: 0.0") == 3  # bit-identical
    assert lr.count("identical at every step") == 3
    bp = log(copy, "bp_align")
    assert "diff check passed" in bp and "worst 5 gradients by max abs diff / allowed" in bp
    for name in ("lr", "bp_align"):
        for suffix in ("_torch.npy", "_paddle.npy", "_diff.log"):
            assert (copy / "log_reprod" / f"{name}{suffix}").is_file()
    lrs = load_npy(copy / "pipeline/Step4/lr_paddle.npy")
    assert sorted(lrs) == ["lr_cosine", "lr_linear", "lr_polynomial"]
    assert all(v.shape == (1024,) and v.dtype == np.float64 for v in lrs.values())
    assert lrs["lr_linear"][345] == 3e-5 and lrs["lr_cosine"][0] == 0.0
    t = load_npy(copy / "pipeline/Step4/bp_align_torch.npy")
    params = [k[len("update_"):] for k in t if k.startswith("update_")]
    assert sorted(k for k in t if k.startswith("grad_")) == sorted("grad_" + p for p in params)
    assert [k for k in t if k.startswith("loss_")] == [f"loss_{i:02d}" for i in range(10)]
    assert t["loss_09"][0] < t["loss_00"][0]  # the 10 steps really train


@pytest.mark.parametrize("bug, failing, first", [
    ("paddle_scheduler_shifted", ["lr_linear", "lr_cosine", "lr_polynomial"],
     "first differs at step 0: torch 0.000000000e+00, paddle 8.695652174e-08"),  # 8.7e-8: 1e-6 would pass it
    ("paddle_cosine_default_cycles", ["lr_cosine"], "first differs at step 346"),  # the reference's "rounding"
    ("paddle_poly_default_end", ["lr_polynomial"], "first differs at step 346"),
])
def test_planted_schedule_bug_turns_the_check_red(copy, bug, failing, first):
    run(PD_LR, home=copy, plant=bug, check=0)
    run(CHECK, "--only", "lr", home=copy, check=1)
    assert failed_keys(log(copy, "lr")) == failing
    assert sum(first in line for line in log(copy, "lr").splitlines()) == len(failing)


@pytest.mark.parametrize("bug, must_fail", [
    # weight decay on LayerNorm/bias barely moves the loss (2e-7 here); the update statistics catch it
    ("paddle_decay_all", ["update_bert.embeddings.LayerNorm.weight",
                          "update_bert.encoder.layer.0.attention.output.LayerNorm.weight"]),
    ("paddle_default_epsilon", ["loss_09", "update_bert.encoder.layer.0.attention.self.query.weight"]),
])
def test_planted_optimizer_bug_turns_the_check_red(copy, bug, must_fail):
    run(PD_BP, home=copy, plant=bug, check=0)
    run(CHECK, "--only", "bp_align", home=copy, check=1)
    failed = failed_keys(log(copy, "bp_align"))
    assert set(must_fail) <= set(failed), failed
    assert not [k for k in failed if k.startswith("grad_")]  # the first gradients come before any update
    if bug == "paddle_decay_all":  # weights that decay on both sides stay aligned
        assert not [k for k in failed if k.endswith(".weight") and "LayerNorm" not in k]


def test_untransposed_linear_gradient_is_caught(copy):
    """A square Linear weight's gradient left in Paddle's [in, out] layout fits the shape, not the values."""
    path = copy / "pipeline/Step4/bp_align_paddle.npy"
    data = load_npy(path)
    key = "grad_bert.encoder.layer.0.attention.self.query.weight"
    data[key] = data[key].T.copy()
    plant_values(path, data)
    run(CHECK, "--only", "bp_align", home=copy, check=1)
    assert failed_keys(log(copy, "bp_align")) == [key]


def test_check_before_scripts_says_what_to_run(home):
    proc = run(CHECK, home=home, check=2)
    assert "pt_lr.py" in error_line(proc)
    assert not (home / "pipeline/Step4/lr_diff.log").exists()


def test_impossible_schedule_is_one_line(home):
    proc = run(PT_LR, "--warmup_steps", 2000, home=home, check=2)
    assert "warmup_steps 2000, total_steps 1024" in error_line(proc)


def test_constant_lr_needs_neither_schedule_library(monkeypatch):
    """PT_BP and PD_BP build AdamW at a constant lr: twins/pt_optim and pd_optim load transformers and paddlenlp
    (paddlenlp's whole package: seconds at every start) only for a schedule, which still needs them."""
    import paddle
    import torch
    from bert_sst2.twins import pd_optim, pt_optim
    banned = ("paddlenlp", "transformers")
    for name in set(banned) | {m for m in sys.modules if m.split(".")[0] in banned}:
        monkeypatch.setitem(sys.modules, name, None)  # an import of either, or of a loaded submodule, now fails
    for module, model in ((pt_optim, torch.nn.Linear(2, 2)), (pd_optim, paddle.nn.Linear(2, 2))):
        importlib.reload(module)  # its top-level imports run again, under the ban
        assert module.build(model, 1e-3)[1] is None
        with pytest.raises(ImportError):
            module.build(model, 1e-3, "linear", 1, 10)


# The real MiniLM weights' 10 AdamW steps, losses, gradients and updates within their tolerances: the README's five
# steps (tests/test_docs_blocks.py runs them on MiniLM) run pt_bp.py and pd_bp.py as here and check_step4.py green.


def test_handed_in_bp_pair_leaves_out_gradients(copy):
    """log_reprod gets losses and updates only (the gradients are ~91 MB a side with MiniLM)."""
    run(CHECK, home=copy, check=0)
    handed = load_npy(copy / "log_reprod/bp_align_paddle.npy")
    assert handed and not [k for k in handed if k.startswith("grad_")]
    assert "loss_00" in handed and any(k.startswith("update_") for k in handed)
    # the log beside the pair states the pair's keys (a reviewer re-derives it); every key's is in diagnostics/
    assert "grad_classifier.weight: " not in (copy / "log_reprod/bp_align_diff.log").read_text()
    assert "grad_classifier.weight: " in (copy / "log_reprod/diagnostics/bp_align_all_keys_diff.log").read_text()
    assert cli.check(copy / "log_reprod", only="bp_align") == 0


def test_gradient_table_names_the_scaled_layer(copy):
    """A gradient scaled in one layer on the Paddle side is named first, in forward order, and heads the table."""
    path = copy / "pipeline/Step4/bp_align_paddle.npy"
    data = load_npy(path)
    key = "grad_bert.encoder.layer.1.intermediate.dense.weight"
    data[key] = data[key] * np.float32(1.01)
    plant_values(path, data)
    proc = run(CHECK, "--only", "bp_align", home=copy, check=1)
    text = log(copy, "bp_align")
    assert f"first parameter over tolerance in forward order: {key}" in text
    table = text[text.index("gradient table, worst first"):].splitlines()
    assert table[2].split("root INFO: ")[1].startswith(key)  # header, then the worst row
    assert "first parameter over tolerance" in proc.stdout


def test_backward_bug_is_placed_where_the_backward_pass_meets_it(copy):
    """A real backward-only bug: the gradient leaving encoder layer 0 scaled by 1.01 in Paddle. Every
    gradient from there back to the embeddings is off; the last one in forward order names layer 0."""
    run(PD_BP, home=copy, plant="paddle_layer0_backward_scaled", check=0)
    run(CHECK, "--only", "bp_align", home=copy, check=1)
    text = log(copy, "bp_align")
    failed = [k for k in failed_keys(text) if k.startswith("grad_")]
    assert "grad_bert.embeddings.word_embeddings.weight" in failed
    assert not [k for k in failed if "layer.1." in k or "pooler" in k or "classifier" in k]
    assert ("last parameter over tolerance in forward order (the first the backward pass reaches): "
            "grad_bert.encoder.layer.0.output.LayerNorm.bias") in text


def test_one_layernorm_epsilon_shows_in_the_gradients(minilm_home, tmp_path):
    """The layer-3 LayerNorm epsilon that moves MiniLM's logits by only ~3e-7 moves its gradients by up to
    5.6e-5 of their size, over the gradients' rtol: Step 4 goes red on a forward bug too, not only Step 1."""
    home = private_copy(minilm_home, tmp_path)
    run(PT_BP, "--iters", 1, home=home, check=0)
    run(PD_BP, "--iters", 1, home=home, plant="paddle_layer3_attention_ln_eps", check=0)
    run(CHECK, "--only", "bp_align", home=home, check=1)
    failed = failed_keys(log(home, "bp_align"))
    assert "grad_bert.encoder.layer.3.attention.output.LayerNorm.weight" in failed
    assert all(k.startswith("grad_") for k in failed)


def test_loss_off_by_ten_times_the_guides_bound_is_red(copy):
    """A loss off by 1e-5 at step 3 is red under the rule and under the guide's mean bound alike."""
    path = copy / "pipeline/Step4/bp_align_paddle.npy"
    data = load_npy(path)
    data["loss_03"] = data["loss_03"] + np.float32(1e-5)
    plant_values(path, data)
    run(CHECK, "--only", "bp_align", home=copy, check=1)
    text = log(copy, "bp_align")
    assert failed_keys(text) == ["loss_03"]
    loss_03 = text[text.index("loss_03: "):].splitlines()[1:3]
    assert "mean diff: check passed: False" in loss_03[0] and "max diff: check passed: False" in loss_03[1]
