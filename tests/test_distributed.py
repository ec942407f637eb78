"""Step 5 data-parallel: 2 processes per framework under their own launchers, on CPU.

torchrun and paddle.distributed.launch each start two processes (gloo collectives);
process 0 writes the results. The 2-process runs must agree with each other (check_step5)
and with a 1-process run on the same global batches; a rank-blind split must go red.
"""
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from bert_sst2 import data
from portcheck.core import record
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import save_npy
from conftest import ROOT, SST2, run
from test_step5 import CHECK, PD, PT, losses

# 210 rows: six full global batches of 32 and a last one of 18, split 16 + 2 over the two processes
SMOKE = ["--data_dir", SST2, "--train_limit", 210, "--deterministic", "--group_by_length", "--log_every", 1]
LAUNCH = {PT: ["-m", "torch.distributed.run", "--nproc_per_node", "2"],
          PD: ["-m", "paddle.distributed.launch", "--nproc_per_node", "2"]}

needs_sst2 = pytest.mark.skipif(not SST2.is_dir(), reason=f"{SST2} not present")


# how each launcher reports its ranks' exit codes: torchrun a failure's `exitcode  : -6 (pid: ...)` each,
# paddle.distributed.launch its failed ranks' `Container rank 1 status failed cmd [...] code -6 log ...` and its
# pod's `Exit code -6` (its first rank's not 0: -15 where the launcher stopped rank 0 after another's abort)
EXIT_CODES = {PT: re.compile(r"^\s*exitcode\s*:\s*(-?\d+)", re.M),
              PD: re.compile(r"^Container rank \d+ status failed .* code (-?\d+) log |\bExit code (-?\d+)", re.M)}
ABORT, STOPPED = -6, -15  # SIGABRT; SIGTERM, the launcher ending the other ranks once one has failed
FRAMEWORK = {PT: "torch", PD: "paddle"}
# what process 0 writes once every process has trained every step (twins/train.py, before they leave together)
RESULTS = ("train_align", "train_curves", "weight_stats")


def torn_down(script, report: str, log: str, home) -> str:
    """Why a launch that failed is a run whose ranks aborted (SIGABRT) at their teardown, after a whole result: a rank
    the launcher names ended by signal 6, every other one by that or by the launcher's own SIGTERM (none by a Python
    error: exit 1); process 0 said its last epoch; and each result it writes at the end is in the home (the launch's
    own: launch() removes them first), its sealed record binding it. "" otherwise: a failed run."""
    fw = FRAMEWORK[script]
    codes = {int(code) for found in EXIT_CODES[script].findall(report)
             for code in (found if isinstance(found, tuple) else (found,)) if code}
    if ABORT not in codes or not codes <= {ABORT, STOPPED}:
        return ""
    if not re.search(rf"^\[{fw}\] epoch \d+ dev acc ", log, re.M):
        return ""
    for name in RESULTS:
        path = home / "pipeline" / "Step5" / f"{name}_{fw}.npy"
        try:
            if not (path.is_file() and record.binds(record.load(path) or {}, record.result_fingerprint(path))
                    == "sealed"):
                return ""
        except (PipelineError, ValueError, OSError):
            return ""
    return f"ranks aborted (exit -6) after process 0 wrote its whole, sealed result ({', '.join(RESULTS)})"


def launch(script, *args, home, tmp_path, plant=None):
    """`python -m <launcher> --nproc_per_node 2 script args` (Paddle's per-rank logs go to tmp_path). A launch whose
    ranks abort at their teardown after the whole result is written (seen on a loaded 2-core host, never alone:
    torn_down) is the run it completed, said as a warning; any other failure is red."""
    launcher = LAUNCH[script] + (["--log_dir", str(tmp_path / "paddle_log")] if script == PD else [])
    planted = [str(ROOT / "tests" / "plant.py"), plant] if plant else []
    cmd = [sys.executable, *launcher, *planted, str(ROOT / script), *map(str, args)]
    env = dict(os.environ, BERT_ALIGN_HOME=str(home), PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    for name in RESULTS:  # what this launch writes, none left from an earlier run
        path = home / "pipeline" / "Step5" / f"{name}_{FRAMEWORK[script]}.npy"
        path.unlink(missing_ok=True)
        record.path_for(path).unlink(missing_ok=True)
    proc = subprocess.run(cmd, cwd="/tmp", env=env, capture_output=True, text=True)
    log = (tmp_path / "paddle_log" / "workerlog.0").read_text() if script == PD else proc.stdout + proc.stderr
    why = proc.returncode and torn_down(script, proc.stdout + proc.stderr, log, home)
    if why:
        warnings.warn(f"{' '.join(cmd)} -> {proc.returncode}: {why}")
    assert proc.returncode == 0 or why, f"{' '.join(cmd)} -> {proc.returncode}\n{log[-3000:]}\n{proc.stderr[-3000:]}"
    return log


@needs_sst2
def test_two_processes_match_each_other_and_one_process(home, tmp_path):
    one = {}
    for script, fw in ((PT, "torch"), (PD, "paddle")):
        run(script, *SMOKE, home=home, check=0)
        one[fw] = losses(home, fw)
    for script in (PT, PD):
        log = launch(script, *SMOKE, home=home, tmp_path=tmp_path)
        assert "2 processes x 16" in log, log[-2000:]
    run(CHECK, home=home, check=0)
    for fw in ("torch", "paddle"):
        two = losses(home, fw)
        assert len(two) == len(one[fw]) == 7
        assert np.abs(two - one[fw]).max() < 1e-5, (fw, two, one[fw])

    launch(PD, *SMOKE, home=home, tmp_path=tmp_path, plant="paddle_rank_split")
    proc = run(CHECK, home=home, check=1)
    assert "diff check failed: loss" in proc.stdout and "curves separate" in proc.stdout


def test_rank_order_splits_each_global_batch():
    order = list(range(100, 182))  # 82 = two batches of 32 and one of 18
    parts = [data.rank_order(order, 32, rank, 2) for rank in (0, 1)]
    assert parts[0] == order[0:16] + order[32:48] + order[64:80]
    assert parts[1] == order[16:32] + order[48:64] + order[80:82]
    assert data.rank_order(order, 32, 0, 1) == order
    with pytest.raises(PipelineError, match="without data"):  # a last batch of 6: nothing for process 1
        data.rank_order(range(70), 32, 0, 2)
    with pytest.raises(PipelineError, match="does not split"):
        data.rank_order(range(64), 32, 0, 3)


def test_a_teardown_abort_is_told_from_a_failed_run(tmp_path):
    """torn_down: ranks aborted after process 0's whole, sealed result is the run; a Python error, an abort before
    the result, an unsealed or edited result, or an abort the log shows no end of, is a failed run."""
    torch_abort = "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n" \
                  "  exitcode  : -6 (pid: 4242)\n  traceback : Signal 6 (SIGABRT) received by PID 4242\n"
    ended = "[torch] step 7/7 loss 0.69\n[torch] epoch 0 dev acc 0.50000\n"
    folder = tmp_path / "pipeline" / "Step5"
    folder.mkdir(parents=True)
    for fw in ("torch", "paddle"):
        record.save_results({folder / f"{name}_{fw}.npy": {"x": np.arange(3.0)} for name in RESULTS}, fw,
                            f"pipeline/Step5/p{fw[0]}_train.py", {"flags": {}})
    assert torn_down(PT, torch_abort, ended, tmp_path)
    paddle_abort = "LAUNCH ERROR Container failed !!!\nContainer rank 1 status failed cmd ['python', " \
                   "'pd_train.py'] code -6 log paddle_log/workerlog.1\nLAUNCH INFO Exit code -15\n"
    paddle_ended = ended.replace("torch", "paddle")
    assert torn_down(PD, paddle_abort, paddle_ended, tmp_path)
    assert torn_down(PD, paddle_abort.replace("Exit code -15", "Exit code -6"), paddle_ended, tmp_path)
    assert not torn_down(PD, paddle_abort.replace("code -6 log", "code 1 log"), paddle_ended, tmp_path)
    assert not torn_down(PD, paddle_abort.replace("Exit code -15", "Exit code -9"), paddle_ended, tmp_path)
    assert not torn_down(PT, torch_abort.replace("-6 (pid", "1 (pid"), ended, tmp_path)    # a Python error
    assert not torn_down(PT, torch_abort + torch_abort.replace("-6 (pid", "1 (pid"), ended, tmp_path)
    assert not torn_down(PD, "LAUNCH INFO Exit code 1", paddle_ended, tmp_path)
    assert not torn_down(PT, torch_abort, "[torch] step 3/7 loss 0.69\n", tmp_path)     # aborted mid-training
    assert not torn_down(PT, "", ended, tmp_path)                                        # no rank's code said
    save_npy(folder / "train_curves_torch.npy", {"x": np.arange(4.0)})                  # a result its record is not
    assert not torn_down(PT, torch_abort, ended, tmp_path)
    (folder / "train_curves_torch.npy").unlink()                                        # a result not written
    assert not torn_down(PT, torch_abort, ended, tmp_path)
    (folder / "weight_stats_paddle.run.json").write_text("{")                          # a broken record
    assert not torn_down(PD, paddle_abort, paddle_ended, tmp_path)
