"""`python -m portcheck run` on training scripts whose Paddle side PaConvert 3.3.1 wrote (tests/paconvert: each pd_*.py
is PaConvert's output of its pt_*.py, as written, but the lines marked "fixed by hand"): each correct pair green, each
plant red and named, the plants being what PaConvert itself writes where it changes the training.

pt_groups.py: a CNN, AdamW over three parameter groups (the convolution at twice the lr), a warmup-cosine LambdaLR and
torch.nn.utils.clip_grad_norm_, which PaConvert writes as paddle.nn.utils.clip_grad_norm_; every Linear written as
paddle.compat.nn.Linear (torch's [out, in] weight), one of them square. pt_plateau.py: a regression MLP, AdamW at
torch's default weight decay, ReduceLROnPlateau on an EMA's validation loss (--sched), the EMA evaluated.

The torch sides run once per pair (module scope); each plant runs the Paddle side alone against them."""
import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

import pytest

from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy, save_npy
from portcheck.gradients.optimizers import REPLAYED, cycled_momentum, CYCLES_MOMENTUM
from portcheck.mapping import pairing
from portcheck.gradients.backward import renames
from portcheck.scripts import judge_run, run, runconfig
from portcheck.scripts.side_files import RECORD
from test_run_scripts import judged, paddle_planted

HERE = Path(__file__).resolve().parent / "paconvert"
STEPS = 3
CLIP = '''        paddle.nn.utils.clip_grad_norm_(
            parameters=model.parameters(), max_norm=args.clip
        )
'''
GROUP_LR = '{"params": conv, "learning_rate": 2.0, "weight_decay": 0.01},'
# where the head's bias starts, the three AdamW steps at lr 0.03 bring it near 0: there Paddle's AdamW's own float32
# arithmetic (1 - beta2 ** t in float32) parts the weights by more than torch's own error allows (1.71e-7 against
# 1.33e-7 after step 3 on this CPU)
HEAD_BIAS = ("--head-bias", "-0.03", "--dropout", "0")
# the plateau pair's steps run past its first epoch (4 steps), whose evaluation the float64 run makes on its float64
# EMA and model from the script's float32 data
LONG = 5


def sides(tmp_path_factory, torch_flags=(), paddle_flags=(), name="groups", which=run.SIDES, steps=STEPS):
    out = tmp_path_factory.mktemp(name) / "out"
    run.prepare(out)
    argv = {"torch": [sys.executable, str(HERE / f"pt_{name}.py"), *torch_flags],
            "paddle": [sys.executable, str(HERE / f"pd_{name}.py"), *paddle_flags]}
    return out, {side: run.run_side(side, argv[fw], out, steps) for side, fw in which}


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    return sides(tmp_path_factory)


@pytest.fixture(scope="module")
def plateau(tmp_path_factory):
    return sides(tmp_path_factory, HEAD_BIAS, HEAD_BIAS, "plateau", steps=LONG)


def test_the_groups_port_is_green_its_clipping_and_compat_layers_seen(groups, tmp_path):
    """paddle.nn.utils.clip_grad_norm_ is the clipping torch's is; the paddle.compat Linears start from torch's weights
    in torch's layout, the square fc2 too (transposed, it would part at fc2); each group's lr is torch's."""
    code, said = paddle_planted(groups, tmp_path, HERE / "pd_groups.py", steps=STEPS)
    assert code == 0 and "the same: every paired module's settings, the optimizer, clipping" in said, said
    status = json.loads((tmp_path / "out" / "paddle" / "status.json").read_text())
    assert status["config"]["clip"] == {"kind": "global_norm", "bound": 0.5}, status["config"]["clip"]
    p = load_npy(tmp_path / "out" / "paddle" / RECORD)
    assert p["state0/fc2.weight"].shape == (8, 8) and p["state0/fc1.weight"].shape == (144, 8)  # the record's layout


def test_clipping_left_out_is_named(groups, tmp_path):
    code, said = paddle_planted(groups, tmp_path, HERE / "pd_groups.py", [(CLIP, "")], STEPS)
    assert code == 1 and "DIFFERS gradient clipping: torch global_norm 0.5 vs paddle none" in said, said


def test_per_group_clipping_and_a_group_lr_paddle_ignores_are_named(groups, tmp_path):
    """The clipping moved into AdamW(grad_clip=ClipGradByGlobalNorm(0.5)), which with parameter groups clips each group
    by its own norm, and the group's "lr" PaConvert passes through, which Paddle ignores: two lines, one run."""
    code, said = paddle_planted(groups, tmp_path, HERE / "pd_groups.py", [
        (CLIP, ""), ("learning_rate=args.lr,\n", "learning_rate=args.lr, grad_clip=paddle.nn.ClipGradByGlobalNorm(args.clip),\n"),
        (GROUP_LR, '{"params": conv, "lr": 2 * args.lr, "weight_decay": 0.01},')], STEPS)
    assert code == 1, said
    assert "DIFFERS gradient clipping: torch clips them by one norm, paddle clips 3 groups of them each by a norm of " \
           f"its own ({runconfig.GROUP_CLIP}): clip with paddle.nn.utils.clip_grad_norm_(model.parameters(), 0.5)" \
           in said, said
    assert "DIFFERS optimizer: lr of torch's parameter group 1 of 3 (conv.weight, conv.bias) torch 0.006 vs paddle " \
           "0.003 (paddle's parameter group gives \"lr\" 0.006, which paddle.optimizer ignores: a group's lr there is " \
           "\"learning_rate\", a multiple of the optimizer's (1 here))" in said, said


def test_torch_clipping_each_group_by_its_own_call_is_paddles_grad_clip_over_those_groups(tmp_path):
    """clip_grad_norm_ called once per parameter group in torch's step clips each group by a norm of its own, as
    Paddle's grad_clip on an optimizer with those groups does: the same clipping, no configuration line (from the
    torch and Paddle runs alone)."""
    per_group = ("for group in optimizer.param_groups:\n"
                 "            torch.nn.utils.clip_grad_norm_(group[\"params\"], args.clip)\n")
    whole = "torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)\n"
    torch_text, paddle_text = (HERE / "pt_groups.py").read_text(), (HERE / "pd_groups.py").read_text()
    assert torch_text.count(whole) == 1 and paddle_text.count(CLIP) == 1
    (tmp_path / "pt_groups.py").write_text(torch_text.replace(whole, per_group))
    (tmp_path / "pd_groups.py").write_text(paddle_text.replace(CLIP, "").replace(
        "learning_rate=args.lr,\n", "learning_rate=args.lr, grad_clip=paddle.nn.ClipGradByGlobalNorm(args.clip),\n"))
    out = tmp_path / "out"
    run.prepare(out)
    statuses = {side: run.run_side(side, [sys.executable, str(tmp_path / f"{prefix}_groups.py")], out, STEPS)
                for side, prefix in (("torch", "pt"), ("paddle", "pd"))}
    assert len(statuses["torch"]["config"]["clip_groups"]) == 3, statuses["torch"]["config"]
    t, p = (load_npy(out / side / RECORD) for side in ("torch", "paddle"))
    config = judge_run.configuration(t, p, statuses, STEPS, pairing.pair(t, p).modules(), renames(t))
    assert not [line for line in config if "clipping" in line], config


def test_a_paddle_type_declared_by_layouts_reaches_the_paddle_side(groups, tmp_path):
    """--layouts takes what layouts= takes, a Paddle type by its module-qualified name too: declared "transpose", the
    compat Linears are started transposed, and fc1 [8, 144] cannot hold torch's [144, 8] transposed: refused."""
    out, statuses = groups
    mine = tmp_path / "out"
    shutil.copytree(out, mine)
    with pytest.raises(PipelineError, match=r"torch fc1.weight \[144, 8\] vs Paddle fc1.weight \[8, 144\]"):
        run.run_side("paddle", [sys.executable, str(HERE / "pd_groups.py")], mine, STEPS,
                     layouts={"paddle.compat.nn.Linear": "transpose"})


def test_the_plateau_port_is_green_and_adamws_own_error_said(plateau, tmp_path):
    """Past the first epoch's EMA evaluation (the float64 run's on its float64 EMA), ReduceLROnPlateau on both sides,
    each a schedule stepped on a metric; Paddle's AdamW's own float32 error at the
    head's bias, replayed in float64 on each side's gradients, said as that wherever the run is red without it (on
    a CPU whose kernels keep it within torch's rule, no line: checked against the records without the replays)."""
    code, said = paddle_planted(plateau, tmp_path, HERE / "pd_plateau.py", steps=LONG)
    statuses = {side: json.loads((tmp_path / "out" / side / "status.json").read_text())
                for side in ("torch", "paddle", "torch64")}
    assert [statuses[s]["config"]["ahead"] for s in ("torch", "paddle")] == [["stepped on a metric"]] * 2, statuses
    assert code == 0, said
    t, p = (load_npy(tmp_path / "out" / side / RECORD) for side in ("torch", "paddle"))
    key = REPLAYED.format(3) + "net.5.bias"
    assert abs(float(p[key][0])) > 10 * abs(float(t[key][0])), (t[key], p[key])  # Paddle's AdamW's own, torch's
    bare = tmp_path / "bare"  # the same records without the replays: judged by torch's own error alone
    shutil.copytree(tmp_path / "out", bare)
    for side in ("torch", "paddle"):
        rec = load_npy(bare / side / RECORD)
        save_npy(bare / side / RECORD, {k: v for k, v in rec.items() if not k.startswith("replayed")})
    without, _ = judged(bare, statuses, LONG)
    lines = [s for s in said.splitlines() if "the two optimizers' own float32 arithmetic" in s]
    assert bool(lines) == bool(without), said
    assert all(s.startswith("  (training: net.") and s.endswith("which no port can meet there)") for s in lines), said


def test_paconverts_adamw_weight_decay_is_named(plateau, tmp_path):
    """PaConvert writes torch's AdamW(params, lr) as weight_decay=0.0 (torch's default is 0.01)."""
    code, said = paddle_planted(plateau, tmp_path, HERE / "pd_plateau.py", [(
        "weight_decay=0.01  # fixed by hand: torch's default", "weight_decay=0.0")], LONG, HEAD_BIAS)
    assert code == 1 and "DIFFERS optimizer: weight decay of net.0.weight torch 0.01 (decoupled) vs paddle 0 " \
        "(decoupled) (and 5 more parameter(s))" in said, said


def test_paconverts_one_cycle_is_named(tmp_path_factory):
    """PaConvert's OneCycleLR: Paddle's final lr 1e-4 where torch's is max_lr / 25 / 1e4, and no momentum cycling
    (torch's cycle_momentum=True, its default, cycles AdamW's beta1): each its line, from the torch and Paddle runs."""
    flags = ("--sched", "onecycle")
    out, statuses = sides(tmp_path_factory, flags, flags, "plateau", run.SIDES[:1])
    text = (HERE / "pd_plateau.py").read_text()
    fixed = "            end_learning_rate=args.lr / 25 / 1e4,  # fixed by hand: torch's max_lr / div_factor / " \
            "final_div_factor\n"
    assert text.count(fixed) == 1
    (out.parent / "pd_plateau.py").write_text(text.replace(fixed, ""))
    statuses["paddle"] = run.run_side("paddle", [sys.executable, str(out.parent / "pd_plateau.py"), *flags], out,
                                      STEPS)
    t, p = (load_npy(out / side / RECORD) for side in ("torch", "paddle"))
    config = judge_run.configuration(t, p, statuses, STEPS, pairing.pair(t, p).modules(), renames(t))
    # torch's OneCycleLR sets AdamW's beta1 to its max_momentum 0.95 as it is built, and cycles it
    assert config[0] == "optimizer: betas torch [0.95, 0.999] vs paddle [0.9, 0.999]", config
    assert config[1].startswith("scheduler: lr ") and "past the run torch " in config[1], config
    assert config[2:] == [f"scheduler: {cycled_momentum({CYCLES_MOMENTUM + 'OneCycleLR': True})[0]}"], config


def full_judged(plateau, tmp_path, paddle_script: Path, torch_flags=(), paddle_flags=()):
    """--full after the plateau pair's N steps (its torch record: the initial weights, the EMA's)."""
    out, _ = plateau
    mine = tmp_path / "out"
    shutil.copytree(out, mine)
    argvs = {"torch": [sys.executable, str(HERE / "pt_plateau.py"), *torch_flags],
             "paddle": [sys.executable, str(paddle_script), *paddle_flags]}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run.full(mine, argvs, None)
    return code, printed.getvalue()


def test_full_starts_the_ema_from_torchs_and_is_green(plateau, tmp_path):
    """The EMA copy the script made before its first step starts from torch's, as the model does: the two trainings,
    EMA evaluations and plateau lrs equal."""
    code, said = full_judged(plateau, tmp_path, HERE / "pd_plateau.py", HEAD_BIAS, HEAD_BIAS)
    assert code == 0 and "training final metric: passed" in said and "training lr: passed" in said, said
    assert "training evaluation modes: passed, the same at every evaluation (dropout active in 0" in said, said


def test_full_names_dropout_left_on_at_evaluation(plateau, tmp_path):
    planted = tmp_path / "pd_plateau.py"
    text = (HERE / "pd_plateau.py").read_text()
    assert text.count("        ema.eval()\n") == 1
    planted.write_text(text.replace("        ema.eval()\n", ""))
    code, said = full_judged(plateau, tmp_path, planted)
    assert code == 1, said
    line = next(s for s in said.splitlines() if s.startswith("training evaluation modes:"))
    assert "FAILED" in line and "dropout" in line, said
