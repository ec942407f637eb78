"""Step 1 passes on aligned models and goes red on each planted bug."""
import json

import paddle
import pytest

from portcheck.core.fileio import load_npy
from conftest import error_line, private_copy, run

FWD = ["pipeline/Step1/pt_forward_bert.py", "pipeline/Step1/pd_forward_bert.py"]
CHECK = "pipeline/Step1/check_step1.py"


def step1(home, plant=None):
    run(FWD[0], home=home, check=0)
    return paddle_step1(home, plant)


def paddle_step1(home, plant=None):
    """The Paddle side and the check, in a home whose torch side is written."""
    run(FWD[1], home=home, plant=plant, check=0)
    return run(CHECK, home=home)


@pytest.fixture(scope="module")
def torch_done(tiny_home, tmp_path_factory):
    """The tiny home with the torch forward written (read-only): the tiny tests change only the Paddle side or its
    weights, so the torch side runs once. From / (every other run here is from /tmp): see
    test_scripts_run_from_any_directory."""
    home = private_copy(tiny_home, tmp_path_factory.mktemp("step1_torch"))
    run(FWD[0], home=home, cwd="/", check=0)
    return home


@pytest.fixture
def torched(torch_done, tmp_path):
    """A private copy of torch_done that a test may break."""
    return private_copy(torch_done, tmp_path)


@pytest.fixture(scope="module")
def aligned(torch_done, tmp_path_factory):
    """torch_done with the clean Paddle side and its check run: (home, the check's process) (read-only)."""
    home = private_copy(torch_done, tmp_path_factory.mktemp("step1_aligned"))
    return home, paddle_step1(home)


def test_aligned_passes_and_fills_log_reprod(aligned):
    home, proc = aligned
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = (home / "pipeline/Step1/forward_diff.log").read_text()
    assert "diff check passed" in log
    # align's measured verdict beside the tuned one (torch's float64 twin of the run): the two agree here
    assert "measured rule (align: 16 x torch's own fp32 error + a floor): all 24 within" in log
    assert "the two verdicts differ" not in log
    for name in ("forward_torch.npy", "forward_paddle.npy", "forward_diff.log"):
        assert (home / "log_reprod" / name).is_file()


def test_untransposed_square_linear_is_caught(torched):
    home = torched
    params = paddle.load(str(home / "weights/paddle_weight.pdparams"))
    key = "encoder.layer.0.attention.self.query.weight"  # [hidden, hidden]: the shape still fits
    params[key] = paddle.to_tensor(params[key].numpy().T)
    paddle.save(params, str(home / "weights/paddle_weight.pdparams"))
    proc = paddle_step1(home)
    assert proc.returncode == 1 and "diff check failed" in proc.stdout


def test_paddle_layernorm_epsilon_is_caught(torched):
    proc = paddle_step1(torched, plant="paddle_ln_eps")
    assert proc.returncode == 1 and "diff check failed" in proc.stdout
    # both verdicts red, the measured one at the first LayerNorm the plant reaches
    assert "measured rule (align: 16 x torch's own fp32 error + a floor): first over: fake/bert.embeddings (" \
        in proc.stdout


def test_ignored_attention_mask_is_caught(torched):
    proc = paddle_step1(torched, plant="paddle_no_mask")
    assert proc.returncode == 1
    # the fake batch has no padding, so only the padded batch can reveal it
    log = (torched / "pipeline/Step1/forward_diff.log").read_text()
    assert "diff check failed: logits_padded" in log


def test_check_before_forward_says_what_to_run(home):
    proc = run(CHECK, home=home)
    assert proc.returncode == 2
    assert "pt_forward_bert.py" in error_line(proc)


def test_missing_weights_is_one_line(home):
    (home / "weights/paddle_weight.pdparams").unlink()
    proc = run(FWD[1], home=home, check=2)
    assert "torch2paddle.py" in error_line(proc)


def test_corrupt_npy_fails_cleanly_and_keeps_results(aligned, tmp_path):
    home = private_copy(aligned[0], tmp_path)
    good = (home / "log_reprod/forward_diff.log").read_text()
    (home / "pipeline/Step1/forward_paddle.npy").write_bytes(b"\x93NUMPY garbage")
    proc = run(CHECK, home=home, check=2)
    assert "forward_paddle.npy" in error_line(proc)
    assert (home / "log_reprod/forward_diff.log").read_text() == good


def test_scripts_run_from_any_directory(torch_done):
    # torch_done ran pt_forward_bert.py from / (every other run here is from /tmp)
    assert load_npy(torch_done / "pipeline/Step1/forward_torch.npy")["logits_fake"].shape == (4, 2)


def test_one_layernorm_epsilon_is_named_as_first_diverging_module(minilm_home, tmp_path):
    """A wrong epsilon in layer 3's attention-output LayerNorm alone moves MiniLM's logits by only ~3e-7,
    within the logits' tolerance; the module check catches it and names the module."""
    home = private_copy(minilm_home, tmp_path)
    proc = step1(home, plant="paddle_layer3_attention_ln_eps")
    assert proc.returncode == 1
    log = (home / "pipeline/Step1/forward_diff.log").read_text()
    verdict = json.loads((home / "pipeline/Step1/forward_diff.json").read_text())
    assert [k["passed"] for k in verdict["keys"]] == [True, True]  # the logits alone would have passed
    assert log.splitlines()[-1].endswith("diff check failed: module outputs")
    assert "first diverging module: fake/bert.encoder.layer.3.attention.output" in log
    assert "layer-by-layer diagnosis" in log


def test_diagnose_table_on_aligned_models(aligned, tmp_path):
    home = private_copy(aligned[0], tmp_path)
    proc = run(CHECK, "--diagnose", home=home, check=0)
    assert "padded/bert.encoder.layer.1.output" in proc.stdout and "module outputs: passed, all" in proc.stdout
