"""Step 5 data-parallel: 2 processes per framework under their own launchers, on CPU.

torchrun and paddle.distributed.launch each start two processes (gloo collectives);
process 0 writes the results. The 2-process runs must agree with each other (check_step5)
and with a 1-process run on the same global batches; a rank-blind split must go red.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from bert_sst2 import data
from portcheck.core.errors import PipelineError
from conftest import ROOT, SST2, run
from test_step5 import CHECK, PD, PT, losses

# 210 rows: six full global batches of 32 and a last one of 18, split 16 + 2 over the two processes
SMOKE = ["--data_dir", SST2, "--train_limit", 210, "--deterministic", "--group_by_length", "--log_every", 1]
LAUNCH = {PT: ["-m", "torch.distributed.run", "--nproc_per_node", "2"],
          PD: ["-m", "paddle.distributed.launch", "--nproc_per_node", "2"]}

needs_sst2 = pytest.mark.skipif(not SST2.is_dir(), reason=f"{SST2} not present")


def launch(script, *args, home, tmp_path, plant=None):
    """`python -m <launcher> --nproc_per_node 2 script args` (Paddle's per-rank logs go to tmp_path)."""
    launcher = LAUNCH[script] + (["--log_dir", str(tmp_path / "paddle_log")] if script == PD else [])
    planted = [str(ROOT / "tests" / "plant.py"), plant] if plant else []
    cmd = [sys.executable, *launcher, *planted, str(ROOT / script), *map(str, args)]
    env = dict(os.environ, BERT_ALIGN_HOME=str(home), PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd="/tmp", env=env, capture_output=True, text=True)
    if script == PD and proc.returncode and "Exit code -6" in proc.stdout + proc.stderr:
        # a Paddle worker aborted (SIGABRT) with no Python error in any worker's log, rank 0's results written: seen
        # twice on 2026-11-26 on a loaded 2-core host, never alone; launched once more, and a second abort stays red
        proc = subprocess.run(cmd, cwd="/tmp", env=env, capture_output=True, text=True)
    log = (tmp_path / "paddle_log" / "workerlog.0").read_text() if script == PD else proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} -> {proc.returncode}\n{log[-3000:]}"
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
