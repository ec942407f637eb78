"""The same tolerances at bert-base width: a random BERT with hidden 768 (4 layers, tests/mid_config.json)
is green on correct code, and the planted bugs and small planted disagreements are red there too."""

import numpy as np
import pytest

from portcheck.core.fileio import load_npy
from conftest import ROOT, make_home, plant_values, private_copy, run, unchanged

FWD = ["pipeline/Step1/pt_forward_bert.py", "pipeline/Step1/pd_forward_bert.py"]
BP = ["pipeline/Step4/pt_bp.py", "pipeline/Step4/pd_bp.py"]
CHECK1, CHECK4 = "pipeline/Step1/check_step1.py", "pipeline/Step4/check_step4.py"
ITERS = ("--iters", 2)  # the first gradients, and two updates: enough for the gradient bugs, and cheap
# the weights and results each test's copy links to (private_copy): ~1 GB a home, copied for each test, wrote 8.9 GB
# more (the file's CPU 86 -> 80 s, its tests' seconds 335 -> 254 on a loaded host); every script and plant here
# replaces such a file, never writes into it (mid_aligned asserts it)
LINKED = (".npy", ".bin", ".pdparams")


@pytest.fixture(scope="module")
def mid_aligned(tmp_path_factory):
    """Weights, head, fake data and both sides' Step 1 and Step 4 outputs, aligned (read-only)."""
    home = make_home(tmp_path_factory.mktemp("mid"), "--random_init", "--config", ROOT / "tests/mid_config.json")
    for script in FWD:
        run(script, home=home, check=0)
    for script in BP:
        run(script, *ITERS, home=home, check=0)
    before = unchanged(home, LINKED)
    yield home
    assert unchanged(home, LINKED) == before, "a test wrote into a file its copy links to"


@pytest.fixture
def mid(mid_aligned, tmp_path):
    return private_copy(mid_aligned, tmp_path, LINKED)


def test_aligned_is_green(mid):
    run(CHECK1, home=mid, check=0)
    run(CHECK4, "--only", "bp_align", home=mid, check=0)


@pytest.mark.parametrize("bug", ["paddle_ln_eps", "paddle_no_mask", "paddle_untransposed_query",
                                 "paddle_layer3_attention_ln_eps"])
def test_forward_bug_turns_step1_red(mid, bug):
    run(FWD[1], home=mid, plant=bug, check=0)
    run(CHECK1, home=mid, check=1)


# The optimizer plants (weight decay on LayerNorm, AdamW's epsilon) act on the update whatever the width;
# tests/test_step4.py has them on the tiny model and MiniLM. Here, the one whose size depends on the model.
@pytest.mark.parametrize("bug, kind", [("paddle_layer0_backward_scaled", "grad_")])
def test_backward_or_optimizer_bug_turns_step4_red(mid, bug, kind):
    # Not the layer-3 LayerNorm epsilon: on random weights that LayerNorm's input has variance ~1, so an
    # epsilon of 1e-5 moves its output by 5e-6 relative (eps / 2 var) and the gradients by ~4e-6, as much
    # as fp32 rounding does; Step 1 still catches it, by its mean (3.9e-6 against 1e-6). Trained MiniLM's
    # smaller variance there makes it 5.6e-5 in the gradients, red in tests/test_step4.py.
    run(BP[1], *ITERS, plant=bug, home=mid, check=0)
    run(CHECK4, "--only", "bp_align", home=mid, check=1)
    text = (mid / "pipeline/Step4/bp_align_diff.log").read_text()
    failed = text.splitlines()[-1].split("diff check failed: ", 1)[1].split(", ")
    assert any(k.startswith(kind) for k in failed), failed


@pytest.mark.parametrize("step, path, key, factor", [
    (1, "pipeline/Step1/forward_paddle.npy", "logits_fake", 1 + 1e-4),  # a 1e-4 relative shift in the logits
    (4, "pipeline/Step4/bp_align_paddle.npy", "grad_bert.encoder.layer.2.output.dense.weight", 1 + 1e-3),
    (4, "pipeline/Step4/bp_align_paddle.npy", "loss_01", None),  # a loss off by 1e-5: ten times the guide's bound
])
def test_small_planted_disagreement_is_red(mid, step, path, key, factor):
    data = load_npy(mid / path)
    data[key] = data[key] * np.float32(factor) if factor else data[key] + np.float32(1e-5)
    plant_values(mid / path, data)
    run(CHECK1 if step == 1 else CHECK4, *(("--only", "bp_align") if step == 4 else ()), home=mid, check=1)
    log = (mid / path).parent / ("forward_diff.log" if step == 1 else "bp_align_diff.log")
    assert log.read_text().splitlines()[-1].endswith(f"diff check failed: {key}")
