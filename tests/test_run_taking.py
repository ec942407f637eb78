"""`python -m portcheck run` judges a kink Paddle crosses in a later step as compare_backward does: where the steps
are red and the two sides' forwards in a later step hold values within the floor of 0 of opposite signs (the near<i>/
keys both recorders write), the torch script runs once more taking Paddle's side of 0 there (the taking run), and
the steps are allowed calibrated.SPREAD x torch against that run too (backward.judged).

The pair is tools/kink_nets.py's net (conv_bn_nets, width 8) as test_run_against_itself's two scripts,
at a seed and batch where Paddle's run crosses a ReLU kink that neither torch's float64 run nor its moved run does:
a correct port, red without the taking run, green with it. Its five runs are made once (module scope)."""
import contextlib
import io
import shutil
import subprocess
import sys

import numpy as np
import pytest

from portcheck.pipeline import kink_files
from portcheck.scripts import run
from portcheck.gradients.against_itself import AGAINST_KEYS
from portcheck.gradients.kinks import NEAR
from portcheck.core.fileio import load_npy, save_npy
from portcheck.scripts.side_files import CROSSED, crossed_file
from test_run_against_itself import PADDLE, TORCH
from test_run_scripts import judged

STEPS, SEED, BATCH = 6, 7, 8  # the net found by a sweep of seeds and batches (docs/run.md)
ARGS = ["--seed", str(SEED), "--batch", str(BATCH)]


@pytest.fixture(scope="module", autouse=True)
def threads():
    """Every run of the module with the thread count the kink was found at (torch's sums split by it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "2")
        yield


@pytest.fixture(scope="module")
def kink_run(tmp_path_factory, threads):
    folder = tmp_path_factory.mktemp("taking")
    (folder / "pt_kink.py").write_text(TORCH)
    (folder / "pd_kink.py").write_text(PADDLE)
    out = folder / "out"
    run.prepare(out)
    argvs = {fw: [sys.executable, str(folder / f"{'pt' if fw == 'torch' else 'pd'}_kink.py"), *ARGS]
             for fw in ("torch", "paddle")}
    statuses = {side: run.run_side(side, argvs[fw], out, STEPS) for side, fw in run.SIDES}
    return out, statuses, argvs


def taking(argvs, out, made, ran=None):
    """judge's again: the taking run, each call's crossings kept in `made`; ran: a folder whose taking run was made
    for the same torch records, reused where it took the same values (the run depends on nothing else)."""
    def again(crossed):
        made.append(crossed)
        if ran is not None:
            crossed_file(out / "asked.json", crossed)
            if (out / "asked.json").read_text() == (ran / "taking" / CROSSED).read_text():
                return {k: v for k, v in run.with_updates(load_npy(ran / "taking" / "record.npy"), STEPS).items()
                        if k.startswith(AGAINST_KEYS)}
        return run.taking_run(argvs["torch"], out, STEPS, crossed)
    return again


@pytest.fixture(scope="module")
def taken(kink_run, tmp_path_factory):
    """The records judged as before (no taking run), then with it: (folder, before, after, the crossings asked)."""
    out, statuses, argvs = kink_run
    mine = tmp_path_factory.mktemp("taken") / "out"
    shutil.copytree(out, mine)
    before = judged(mine, statuses, STEPS)
    before_log = (mine / "pairs" / "bp_align_diff.log").read_text()
    made = []
    after = judged_with(mine, statuses, taking(argvs, mine, made))
    return mine, (*before, before_log), after, made


def test_a_correct_port_red_on_a_later_kink_is_green_with_the_taking_run(kink_run, taken):
    out = kink_run[0]
    mine, (code, said, log), after, made = taken
    t, p = (load_npy(out / side / "record.npy") for side in ("torch", "paddle"))
    assert any(k.startswith(NEAR) for k in t) and any(k.startswith(NEAR) for k in p), "no near<i>/ keys recorded"
    if code == 0:
        pytest.skip("this CPU's kernels cross no kink in this net that torch's moved run does not")
    # as before: judge_backward alone, red where Paddle crossed, the report saying the taking run was not made
    assert "training: RED, the runs part at" in said and "after step" in said, said
    assert "is not made" in log and "is not made" in said, log
    code, said = after
    assert code == 0 and "green: the same run for the first steps" in said, said
    assert len(made) == 1 and all(c.step >= 1 for c in made[0]), made
    log = (mine / "pairs" / "bp_align_diff.log").read_text()
    assert "torch's run again taking Paddle's side of 0 there is torch against itself" in log, log
    # the taking run is torch's own until the step whose forward crossed: it starts from torch's weights, fed its batches
    t, again = load_npy(mine / "torch" / "record.npy"), load_npy(mine / "taking" / "record.npy")
    first = min(c.step for c in made[0])
    assert all(np.array_equal(t[f"loss/{i}"], again[f"loss/{i}"]) for i in range(first)), "not torch's run up to it"
    assert not np.array_equal(t[f"state{STEPS}/0.weight"], again[f"state{STEPS}/0.weight"]), "no side of 0 taken"
    # the hand-in carries that run's figures, and its checker re-derives green from the folder alone
    assert (mine / "log_reprod" / "diagnostics" / f"bp_align{kink_files.TAKEN}").is_file()
    assert run_check(mine / "log_reprod") == 0


def judged_with(out, statuses, again, steps=STEPS):
    """(exit code, summary) of run.judge with the taking run `again`."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run.judge(out, statuses, steps, again=again)
    return code, printed.getvalue()


def run_check(top) -> int:
    return subprocess.run([sys.executable, "-m", "portcheck", "check", str(top), "--only", ",".join(run.PAIRS)],
                          capture_output=True).returncode


def before(key: str, steps: int) -> bool:
    """A record's key of the first `steps` steps (a step's loss, lr, batch, near values, the weights after it)."""
    head, _, rest = key.partition("/")
    for prefix, last in (("state", steps), (NEAR, steps - 1)):
        if head.startswith(prefix) and head[len(prefix):].isdigit():
            return int(head[len(prefix):]) <= last
    if head in ("loss", "lr"):
        return int(rest) < steps
    if head in ("input", "target"):
        return int(rest.partition("/")[0].removeprefix("batch_")) < steps
    return True


PLANTS = {  # Paddle's script changed: (the change, whether its run crosses the same kink, the taking run made)
    # train mode normalizes by the batch's statistics: the forwards are the clean port's, the running mean is not
    "one BatchNorm momentum 0.2 (torch's 0.1)": ("nn.BatchNorm2D(o)", "nn.BatchNorm2D(o, momentum=0.8 if i else 0.9)",
                                               True),
    "weight decay 1e-4 (torch's none)": ("parameters=model.parameters())",
                                         "parameters=model.parameters(), weight_decay=1e-4)", False),
}


@pytest.mark.parametrize("plant", PLANTS)
def test_a_plant_beside_the_kink_stays_red(kink_run, taken, plant, tmp_path):
    """Each plant red, judged with the taking run where its Paddle run crosses the kink the clean one does."""
    statuses, argvs = kink_run[1:]
    if taken[1][0] == 0:
        pytest.skip("this CPU's kernels cross no kink in this net that torch's moved run does not")
    mine = tmp_path / "out"
    shutil.copytree(taken[0], mine)
    old, new, crosses = PLANTS[plant]
    script = tmp_path / "pd_kink.py"
    script.write_text(PADDLE.replace(old, new))
    assert script.read_text() != PADDLE
    status = run.run_side("paddle", [sys.executable, str(script), *ARGS], mine, STEPS)
    made = []
    code, said = judged_with(mine, {**statuses, "paddle": status}, taking(argvs, mine, made, ran=taken[0]))
    assert code == 1 and "training: RED, the runs part at" in said and "configuration" in said, said
    assert bool(made) == crosses, made
    # the clean run's figures in the copied folder are not this run's: written again only where its run was made
    assert all((d / f"bp_align{kink_files.TAKEN}").is_file() == crosses
               for d in (mine / "pairs", mine / "log_reprod" / "diagnostics"))
    if crosses:
        assert "torch's run again taking Paddle's side of 0 there is torch against itself" in said, said


def test_a_green_run_makes_no_taking_run(kink_run, tmp_path):
    """The same records cut to the steps before the kink is crossed: green, and judge never calls the taking run."""
    out, statuses, argvs = kink_run
    mine = tmp_path / "out"
    shutil.copytree(out, mine)
    steps = 4
    for side, _ in run.SIDES:
        rec = load_npy(mine / side / "record.npy")
        save_npy(mine / side / "record.npy", {k: v for k, v in rec.items() if before(k, steps)})
    made = []
    code, said = judged_with(mine, statuses, taking(argvs, mine, made), steps)
    assert code == 0 and "green: the same run for the first steps" in said, said
    assert made == [] and not (mine / "taking" / "record.npy").exists(), "a green run made the taking run"


def test_the_taking_runs_record_is_read_as_the_torch_runs(tmp_path, monkeypatch):
    """A torch name Paddle holds none of (a head tied to the embedding, which Paddle computes from the embedding's
    weight) is left out of the torch run's record (run.alone), so of its update digests; the taking run's record was
    read whole, its digests one longer, and a red run that crossed a kink ended in a traceback in kinks.take (found
    by a tiny GPT pair written outside the project, its Paddle beta2 planted). It is read the same way now."""
    import json

    from portcheck.scripts.side_files import RECORD, STATUS
    (tmp_path / "paddle").mkdir()
    (tmp_path / "paddle" / STATUS).write_text(json.dumps({"config": {"one_sided": {"tied": ["head.weight"]}}}))
    (tmp_path / run.TAKING).mkdir()
    names = ("emb.weight", "head.weight", "fc.weight")
    save_npy(tmp_path / run.TAKING / RECORD, {f"state{i}/{n}": np.full((2, 2), i * (j + 1), np.float32)
                                              for i in range(2) for j, n in enumerate(names)})
    monkeypatch.setattr(run, "run_side", lambda *args, **kwargs: None)
    taken = run.taking_run(["python"], tmp_path, 1, [])
    assert "state1/head.weight" not in taken and len(taken["weights/0"]) == 2, taken
