"""The flag rules several scripts share (bert_sst2/flags.py), and Step 5's flags as one dataclass."""
import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest

from bert_sst2 import flags
from bert_sst2.flags import TrainArgs
from portcheck.core.errors import PipelineError
from conftest import ROOT, error_line, run

FORWARDED = [f.name for f in fields(TrainArgs) if f.metadata["forward"]]


def declared_flags(script: Path) -> set:
    """The --flags a script's own parser declares (its add_argument calls)."""
    tree = ast.parse(script.read_text())
    return {node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "attr", "") == "add_argument" and node.args
            and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("--")}


def scripts():
    return sorted(p for d in ("pipeline", "weights", "classifier_weights", "fake_data", "tools")
                  for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("value, ok", [(3e-5, True), (1.0, True), (0.0, False), (-1e-5, False), (1.5, False),
                                       (float("nan"), False), (float("inf"), False)])
def test_lr_rule(value, ok):
    assert (flags.LR.problem("--lr", value) is None) == ok


@pytest.mark.parametrize("value, ok", [(0, True), (2021, True), (flags.MAX_SEED, True), (-1, False),
                                       (flags.MAX_SEED + 1, False), (2 ** 32 - 1, False), (True, False)])
def test_seed_rule(value, ok):
    """One seed rule for every script: Step 5 adds up to 2^21 per-step offsets, so every script stops there."""
    assert (flags.SEED.problem("--seed", value) is None) == ok


def test_every_lr_and_seed_flag_uses_the_shared_rule():
    """A script that declares --lr or --seed judges it by flags.LR / flags.SEED, not a copy that can drift
    (planted: pt_lr.py's old '> 0' and pt_data_loader's '< 2**32' each failed this)."""
    checked = 0
    for script in scripts():
        text, declared = script.read_text(), declared_flags(script)
        for flag, rule in (("--lr", "flags.LR"), ("--seed", "flags.SEED")):
            if flag in declared:
                checked += 1
                assert rule in text or "TrainArgs(" in text, \
                    f"{script.relative_to(ROOT)} declares {flag} but does not check it with {rule} (or TrainArgs)"
    assert checked >= 7, checked  # Step 2 and 4's pairs, and the seeded setup scripts
    assert not re.search(r"2 \*\* 32", "".join(p.read_text() for p in scripts())), "a seed bound written inline"


def test_step4_refuses_the_lr_step5_refuses(tmp_path):
    proc = run("pipeline/Step4/pt_lr.py", "--lr", "1.5", home=tmp_path, check=2)
    assert error_line(proc) == f"error: {flags.LR.problem('--lr', 1.5)}"


def test_train_args_round_trip():
    """to_argv() gives back the same flags through the parser the Step 5 scripts use."""
    args = TrainArgs(data_dir=Path("/data/SST-2"), epochs=2, max_steps=7, lr=5e-5, seed=3, shared_dropout=True,
                     group_by_length=True, eval_steps=4, log_every=1, output_dir=Path("/out"))
    again = TrainArgs.from_namespace(TrainArgs.parser("torch").parse_args(args.to_argv()))
    assert again == args
    assert TrainArgs().to_argv() == []


def test_train_args_rules():
    assert TrainArgs().problems() == []
    bad = TrainArgs(epochs=0, max_steps=0, lr=2.0, seed=-1, warmup_proportion=1.0, demo=True,
                    data_dir=Path("x"), deterministic=True, shared_dropout=True)
    problems = " ; ".join(bad.problems())
    for flag in ("--epochs", "--max_steps", "--lr", "--seed", "--warmup_proportion", "--demo and --data_dir",
                 "--deterministic and --shared_dropout"):
        assert flag in problems, (flag, problems)
    with pytest.raises(SystemExit):  # the parser keeps the two dropout modes apart too
        TrainArgs.parser("torch").parse_args(["--deterministic", "--shared_dropout"])


def test_run_all_forwards_exactly_the_forwarded_fields():
    """run_all.py's Step 5 flags come from the dataclass: each forwarded field is one of its flags, and the
    BERT pipeline's page lists the same ones (English and Chinese)."""
    run_all = declared_flags(ROOT / "pipeline" / "run_all.py")
    assert not {f"--{name}" for name in FORWARDED} & run_all, "run_all declares a Step 5 flag again"
    for readme in ("docs/bert.md", "docs/bert_cn.md"):
        text = (ROOT / readme).read_text()
        listed = re.search(r"(?:flags pass through |原样传递下去)[(（](.*?)[)）]", text, re.S)
        assert listed, readme
        names = set(re.findall(r"`--(\w+)`", listed.group(1)))
        assert names == set(FORWARDED) - {"data_dir"}, (readme, names)


def test_run_all_refuses_a_bad_step5_flag_before_writing(tmp_path):
    proc = run("pipeline/run_all.py", "--lr", "0", home=tmp_path, check=2)
    assert "--lr must be a finite number in (0, 1]" in error_line(proc)
    assert not any(tmp_path.iterdir())


def test_validate_needs_no_stand_in():
    with pytest.raises(PipelineError, match="--epochs"):
        from bert_sst2.twins import train
        train.validate(TrainArgs(epochs=0, demo=True))
