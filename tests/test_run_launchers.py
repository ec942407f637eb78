"""`python -m portcheck run` with launchers: torchrun against python -m paddle.distributed.launch, 2 ranks a side
on CPU (gloo), each rank recording its own and rank r judged against rank r; a planted sharding bug red at its
ranks; a rank count that differs, and a launcher portcheck does not know, one line each.

The torch side and its float64 run are launched once (module scope); each Paddle script is launched against them,
as tests/test_run_scripts.py does (run.run_ranks, run.judge: what `run` does after the scripts)."""
import contextlib
import io
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from portcheck.scripts import folders, run, judge_run
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy
from portcheck.forward.twin import F64

SCRIPTS = Path(__file__).resolve().parent.parent / "examples" / "scripts"
STEPS = 2
TORCHRUN = shutil.which("torchrun", path=str(Path(sys.executable).parent))


def paddle_launch(tmp: Path, script: Path) -> list:
    return [sys.executable, "-m", "paddle.distributed.launch", "--log_dir", str(tmp / "log"), "--nproc_per_node", "2",
            str(script)]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The torch side (2 ranks), the example's Paddle side (2 ranks), torch's float64 run (2 ranks)."""
    if TORCHRUN is None:
        pytest.skip("torchrun is not beside this interpreter")
    tmp = tmp_path_factory.mktemp("launched")
    out = tmp / "out"
    run.prepare(out)
    argv = {"torch": [TORCHRUN, "--nproc_per_node", "2", str(SCRIPTS / "pt_ddp.py")],
            "paddle": paddle_launch(tmp, SCRIPTS / "pd_ddp.py")}
    found = {side: run.run_ranks(side, argv[fw], out, STEPS, launched=True) for side, fw in run.SIDES}
    return out, found


def judged(out: Path, found: dict) -> dict:
    """{rank: (exit code, summary)}, rank r of each side judged against rank r of the other."""
    said = {}
    for r in sorted(found["torch"]):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = run.judge(out / f"rank{r}", {side: found[side][r] for side in found}, STEPS, rank=r)
        said[r] = code, printed.getvalue()
    return said


def test_each_rank_records_its_own_and_is_green_against_its_counterpart(launched):
    out, found = launched
    assert sorted(found["torch"]) == sorted(found["paddle"]) == sorted(found["torch64"]) == [0, 1]
    records = {r: {side: load_npy(out / f"rank{r}" / side / "record.npy") for side in found} for r in (0, 1)}
    batch = "input/batch_0/args/0"
    assert not np.array_equal(records[0]["torch"][batch], records[1]["torch"][batch]), "the ranks fed one batch"
    for side in ("torch", "torch64"):  # DDP averaged each run's gradients over the ranks, its float64 run's too
        assert all(np.array_equal(records[0][side][k], records[1][side][k]) for k in records[0][side]
                   if k.startswith("grad/")), f"the {side} run's ranks hold different gradients"
    stats = [k for k in records[0]["torch"] if k.startswith("state1/") and f"grad/{k[7:]}" not in records[0]["torch"]]
    assert stats and all(np.allclose(records[0]["torch64"][k], records[0]["torch"][k], rtol=1e-5, atol=1e-6)
                         for k in stats), "the float64 run's BatchNorm statistics are not torch's (its isolated run's?)"
    for r, (code, said) in judged(out, found).items():
        assert code == 0 and "green: the same run for the first steps" in said, (r, said)
        assert f"rank{r}" in said, said
        # torch's rank 1 holds rank 0's BatchNorm statistics from the second forward on (DDP's broadcast_buffers),
        # Paddle's its own: those alone are left to rank 0, which judges its own
        assert ("by design: torch's DistributedDataParallel" in said) == (r == 1), said
    left = judge_run.rank0_buffers(judge_run.merged(records[1]["torch"], records[1]["torch64"]))
    assert left and {k.rpartition(".")[2] for k in left} == {"running_mean", "running_var"}, left
    assert not any(k.startswith(("state1/", F64 + "state1/")) for k in left), left


def test_a_sharding_bug_is_red_at_each_rank_and_named(launched, tmp_path):
    """Paddle's ranks take contiguous shares of the global batch, torch's strided ones: each rank fed another batch."""
    out, found = launched
    text = (SCRIPTS / "pd_ddp.py").read_text()
    line = "idx = np.arange(start, start + args.batch_size)[rank::world]"
    assert text.count(line) == 1
    script = tmp_path / "pd_ddp.py"
    script.write_text(text.replace(line, "idx = np.arange(start, start + args.batch_size).reshape(world, -1)[rank]"))
    mine = tmp_path / "out"
    shutil.copytree(out, mine)
    found = {**found, "paddle": run.run_ranks("paddle", paddle_launch(tmp_path, script), mine, STEPS, launched=True)}
    for r, (code, said) in judged(mine, found).items():
        assert code == 1 and "data RED: the batches or targets the Paddle script feeds differ: input/batch 0" in said, \
            (r, said)


def test_a_rank_count_that_differs_is_one_line(launched, tmp_path):
    """A one-process Paddle command beside a launched torch one is rank 0; torch's rank 1 has no counterpart."""
    out, found = launched
    mine = tmp_path / "out"
    shutil.copytree(out, mine)
    paddle = run.run_ranks("paddle", [sys.executable, str(SCRIPTS / "pd_ddp.py")], mine, STEPS, launched=False)
    assert sorted(paddle) == [0]
    with pytest.raises(PipelineError, match=r"the torch script ran 2 rank\(s\), the Paddle script 1: give both "
                                            "commands the same number of processes"):
        run.same_ranks({"torch": found["torch"], "paddle": paddle})


def test_a_launcher_portcheck_does_not_know_is_one_line(tmp_path):
    """Ranks started by another launcher would share one folder: each refuses in one line."""
    script = tmp_path / "t.py"
    script.write_text("print('never reached')\n")
    out = tmp_path / "out"
    run.prepare(out)
    settings = {"side": "torch", "steps": 1, "out": str(out / "torch"), "torch_dir": str(out / "torch")}
    env = dict(run.environment(settings), RANK="1", WORLD_SIZE="2")
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert "never reached" not in p.stdout
    with pytest.raises(PipelineError, match="rank 1 of 2 under a launcher `portcheck run` does not know"):
        folders.status_of("the torch script", out / "torch", p.returncode, 1)


def test_full_with_a_launcher_is_one_line(tmp_path):
    launcher = f"{sys.executable} -m torch.distributed.run --nproc_per_node 2 t.py"
    p = subprocess.run([sys.executable, "-m", "portcheck", "run", "--torch", launcher, "--paddle",
                        f"{sys.executable} t.py", "--full", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, cwd=tmp_path)
    line = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 2 and line.startswith("error: --full runs one process per side"), p.stderr
