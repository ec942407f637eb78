"""Handin.generate: the `generate` pair (each side's greedy tokens and next-token logits at every step, torch's
float64 twin's beside them) handed in and judged by the reviewer's command. The clean tiny Llama pair green in
process and in the folder; Paddle's file from another run (another prompt), a copy of torch's, and a port whose
cached decoding restarts its positions at 0 are red. A near-tie the two sides choose apart is a tie, as
compare_generate judges it; the same token pulled ahead beyond the rule is red."""
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
import portcheck  # noqa: E402
from portcheck import cli  # noqa: E402
from test_generate import IDS, LLAMA, patched  # noqa: E402

STEPS = 3


def models():
    from paddlenlp.transformers import LlamaConfig as PaddleConfig, LlamaForCausalLM as PaddleLlama
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    return (LlamaForCausalLM(LlamaConfig(**LLAMA, attn_implementation="eager")).eval(),
            PaddleLlama(PaddleConfig(**LLAMA)).eval())


def handed(top, ids=IDS, plant=None):
    steps = portcheck.Handin(top)
    models_ = models()
    steps.convert(*models_, {"input_ids": ids}, layouts={"LlamaLMHead": "transpose"})
    if plant is None:
        return steps, steps.generate(*models_, ids, STEPS, convert=False)
    with patched(models_[1].llama, plant):
        return steps, steps.generate(*models_, ids, STEPS, convert=False)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    top = tmp_path_factory.mktemp("clean") / "log_reprod"
    return (top, *handed(top))


def test_the_clean_pairs_generate_hand_in_is_green_in_process_and_by_the_reviewers_command(clean, capsys):
    top, steps, report = clean
    assert report.passed and steps.passed, steps
    assert str(steps).startswith("generate: measured green")
    torch_side = np.load(top / "generate_torch.npy", allow_pickle=True).item()
    assert torch_side["tokens"].shape == (STEPS, 1) and torch_side["logits"].shape == (STEPS, 1, LLAMA["vocab_size"])
    assert cli.check(top, only="generate") == 0
    assert "generate: " in capsys.readouterr().out


def test_paddles_file_from_another_run_or_a_copy_of_torchs_is_red(clean, tmp_path, capsys):
    top = clean[0]
    other = tmp_path / "other" / "log_reprod"
    handed(other, ids=IDS[:, ::-1].copy())
    for name, source in (("copy", top / "generate_torch.npy"), ("another run", other / "generate_paddle.npy")):
        planted = tmp_path / name.replace(" ", "_") / "log_reprod"
        shutil.copytree(top, planted)
        shutil.copy(source, planted / "generate_paddle.npy")
        assert cli.check(planted, only="generate") != 0, name
    # the other run's file with its own run record: each is the run it says, but not this pair's
    moved = tmp_path / "moved" / "log_reprod"
    shutil.copytree(top, moved)
    for f in ("generate_paddle.npy", "diagnostics/generate_paddle.run.json"):
        shutil.copy(other / f, moved / f)
    assert cli.check(moved, only="generate") != 0
    assert "generate: RED" in capsys.readouterr().out


def test_positions_restarting_at_0_with_a_cache_are_red_in_the_hand_in(tmp_path):
    def restart(forward):
        def run(*args, **kwargs):
            if kwargs.get("past_key_values") is not None:
                kwargs["position_ids"] = None
            return forward(*args, **kwargs)
        return run
    top = tmp_path / "log_reprod"
    steps, report = handed(top, plant=restart)
    assert not report.passed and report.first_step == 2 and not steps.passed, steps
    assert cli.check(top, only="generate") != 0


def bumped(delta: float, token: int):
    """The Paddle model's next-token logits with `delta` added at `token`, as a port's rounding (or a bug) moves
    them."""
    def wrap(forward):
        def run(*args, **kwargs):
            out = forward(*args, **kwargs)
            logits = out.logits if hasattr(out, "logits") else out[0]
            add = np.zeros(LLAMA["vocab_size"], np.float32)
            add[token] = delta
            logits = logits + paddle.to_tensor(add)
            if hasattr(out, "logits"):
                out.logits = logits
                return out
            return (logits, *out[1:])
        return run
    return wrap


@pytest.mark.parametrize("delta", [3e-7, 1e-2])
def test_a_near_tie_chosen_apart_is_a_tie_and_a_token_pulled_ahead_beyond_the_rule_red(tmp_path, capsys, delta):
    """torch's head holds two tokens' rows equal (the first step's choice and the next id): their logits tie, torch
    chooses the first. Paddle's logits of the second moved by 3e-7 (within the rule): Paddle chooses it, a tie, green
    in process and by the reviewer's command, said as a tie; moved by 1e-2: a differing choice, red."""
    pt, pd = models()
    with torch.no_grad():
        a = int(pt(torch.from_numpy(IDS)).logits[0, -1].argmax())
        b = a + 1 if a + 1 < LLAMA["vocab_size"] else a - 1
        pt.lm_head.weight[b] = pt.lm_head.weight[a]
    top = tmp_path / "log_reprod"
    steps = portcheck.Handin(top)
    steps.convert(pt, pd, {"input_ids": IDS}, layouts={"LlamaLMHead": "transpose"})
    with patched(pd, bumped(delta, max(a, b))):
        report = steps.generate(pt, pd, IDS, STEPS, convert=False)
    tokens = np.load(top / "generate_paddle.npy", allow_pickle=True).item()["tokens"]
    assert tokens[0, 0] == max(a, b) != report.tokens["fed"][0][0] == min(a, b)
    code = cli.check(top, only="generate")
    out = capsys.readouterr().out
    said = f"step 1, row 0: torch chose {min(a, b)}, paddle {max(a, b)}: "
    if delta < 1e-6:
        assert report.passed and steps.passed and code == 0, (report.lines(), steps, out)
        assert f"tokens: green ({said}a tie, not a bug" in out, out
    else:
        assert not report.passed and not steps.passed and code != 0, (report.lines(), steps, out)
        assert f"tokens: RED ({said}a differing choice" in out, out
