"""`python -m portcheck run` of a Paddle script launched split in tensor parallel (examples/scripts/pd_tp.py: fleet's
mp_degree=2 under python -m paddle.distributed.launch, gloo on CPU) against torch's script in one process
(pt_tp.py): the clean port green, its ranks' records joined into one Paddle side by each layer's layout; a
row-parallel layer whose all-reduce is missing red at its module, the ranks' copies named apart; ranks that are not
one split model or disagree on their configuration, a side past --timeout, a rank that dies (named, not the one it
leaves failing), one line each.

The clean run is made once (module scope: torch's three runs and one launch of the Paddle ranks); the plant is one
more launch of the Paddle ranks judged against the same torch runs (what split_ranks.launched does after them)."""
import argparse
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy
from portcheck.scripts import launch, progress, run, split_ranks
from portcheck.scripts.folders import MOVED_SIDES

SCRIPTS = Path(__file__).resolve().parent.parent / "examples" / "scripts"
STEPS = 2
# the port's own row-parallel layer, its all-reduce forgotten: each rank's partial sum taken as the whole
NO_ALLREDUCE = '''
class NoAllReduce(RowParallelLinear):
    def forward(self, x):
        return paddle.nn.functional.linear(x, self.weight, self.bias)


class Net(nn.Layer):'''


def paddle_launch(tmp: Path, script: Path) -> list:
    return [sys.executable, "-m", "paddle.distributed.launch", "--log_dir", str(tmp / "log"), "--nproc_per_node", "2",
            str(script)]


def said(fn, *args, **kwargs):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = fn(*args, **kwargs)
    return code, printed.getvalue()


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split_run")
    out = tmp / "out"
    run.prepare(out)
    argvs = {"torch": [sys.executable, str(SCRIPTS / "pt_tp.py")], "paddle": paddle_launch(tmp, SCRIPTS / "pd_tp.py")}
    code, text = said(split_ranks.launched, argvs, out, STEPS, run.judge)
    run.released(out)
    return tmp, out, code, text


def test_the_split_port_is_green_its_ranks_joined(clean):
    _, out, code, text = clean
    assert code == 0 and "green: the Paddle model split across 2 ranks, joined" in text, text
    assert "stood in for by paddle.distributed.all_reduce" in text and "every paired module within its rule" in text
    ranks = [load_npy(out / f"rank{r}" / "paddle" / "record.npy") for r in (0, 1)]
    whole, torch = load_npy(out / "paddle" / "record.npy"), load_npy(out / "torch" / "record.npy")
    # each rank holds its shard: the column-parallel weight's columns, the vocabulary's rows, joined whole
    assert ranks[0]["grad/up.weight"].shape == (16, 24) and whole["grad/up.weight"].shape == (16, 48)
    assert whole["state1/embed.weight"].shape == torch["state1/embed.weight"].shape == (32, 16)
    assert not np.array_equal(ranks[0]["grad/up.weight"], ranks[1]["grad/up.weight"])
    assert np.array_equal(whole["grad/up.weight"][:, 24:], ranks[1]["grad/up.weight"])
    # the activation between the split layers: its columns joined, judged on torch's values too
    assert whole["out/act"].shape == torch["out/act"].shape == (8, 6, 48)
    assert "iso/out/act" in whole and whole["iso/out/act"].shape == (8, 6, 48)
    assert all(np.array_equal(ranks[0][f"loss/{i}"], ranks[1][f"loss/{i}"]) for i in range(STEPS))
    # every whole output and replicated tensor checked alike on the ranks (on this CPU): none apart
    assert "checked the same on every rank (bit for bit: the loss, each whole output" in text
    # each rank's progress as it ended (what a timeout reads): its model's calls, steps and collectives beaten, none
    # left waiting
    marks = [progress.read(out / f"rank{r}" / "paddle") for r in (0, 1)]
    assert all(m and m["waiting"] is None and m["step"] == STEPS - 1 and m["beats"] > 10 for m in marks), marks


def test_a_missing_all_reduce_is_red_at_its_module_and_the_ranks_copies_part(clean, tmp_path):
    tmp, clean_out, _, _ = clean
    script = tmp_path / "pd_tp.py"
    text = (SCRIPTS / "pd_tp.py").read_text()
    script.write_text(text.replace("\n\nclass Net(nn.Layer):", NO_ALLREDUCE, 1).replace(
        "self.down = RowParallelLinear(", "self.down = NoAllReduce("))
    out = tmp_path / "out"
    run.prepare(out)
    for side in ("torch", "torch64", *MOVED_SIDES):  # torch's runs, as the clean run made them
        shutil.copytree(clean_out / side, out / side, dirs_exist_ok=True)
    statuses = {side: run.read_status(out / side / "status.json", side) for side in ("torch", "torch64", *MOVED_SIDES)}
    found = run.run_ranks("paddle", paddle_launch(tmp_path, script), out, STEPS, True, torch_whole=True)
    joint = split_ranks.joined(out, found, "the Paddle script")
    code, text = said(run.judge, out, {**statuses, "paddle": joint.status}, STEPS)
    assert code == 1 and "the runs part at down [PC835]" in text, text
    # its input, the activation's columns, joined as the row-parallel layer it derives from takes them: the same
    assert "down: its input differs" not in (out / "log_reprod" / "bp_align_diff.log").read_text()
    line = joint.apart_line()
    assert line.startswith("the ranks part: rank(s) 1 of 2 hold another loss at step 1 than rank 0 (") and \
        line.endswith("[PC933]"), line
    assert [what for what, _ in joint.apart][2:4] == ["down's output", "norm's output"], joint.apart


def test_ranks_that_are_not_one_split_model_are_one_line(clean):
    _, out, _, _ = clean
    status = run.read_status(out / "rank0" / "paddle" / "status.json", "rank 0")
    whole = {**status, "config": {k: v for k, v in status["config"].items() if k != split_ranks.SPLIT}}
    with pytest.raises(PipelineError, match=r"not split in tensor parallel .*\[PC937\]"):
        split_ranks.joined(out, {0: whole, 1: whole}, "the Paddle script")
    with pytest.raises(PipelineError, match=r"ranks \[0\] are not the 2 ranks of one model-parallel group.*\[PC934\]"):
        split_ranks.joined(out, {0: status}, "the Paddle script")


def test_ranks_whose_configurations_differ_are_one_line_naming_the_field(clean):
    _, out, _, _ = clean
    statuses = {r: run.read_status(out / f"rank{r}" / "paddle" / "status.json", f"rank {r}") for r in (0, 1)}
    assert not split_ranks.config_apart([statuses[0]["config"], statuses[1]["config"]])  # only the rank differs
    # rank 1's LayerNorm built with another epsilon: its loss parts only by the numbers; the settings name it
    config = statuses[1]["config"]
    statuses[1] = {**statuses[1], "config": {**config, "modules": {**config["modules"], "norm": {
        **config["modules"]["norm"], "eps": 0.001}}}}
    with pytest.raises(PipelineError, match=r"the Paddle script's ranks disagree on their configuration: "
                                            r"modules\.norm\.eps: rank 0 1e-05, rank 1 0\.001: .*\[PC483\]"):
        split_ranks.joined(out, statuses, "the Paddle script")


def test_a_script_past_its_timeout_is_ended_with_what_it_started(tmp_path):
    """launch.script: the script and the process it started (a launcher's rank) both ended at the timeout."""
    script = tmp_path / "hangs.py"
    script.write_text("import os, subprocess, sys, time\n"
                      "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                      "open(sys.argv[1], 'w').write(f'{os.getpid()} {child.pid}')\n"
                      "time.sleep(60)\n")
    pids = tmp_path / "pids"
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        launch.script([sys.executable, str(script), str(pids)], dict(os.environ), timeout=3)
    assert time.monotonic() - start < 3 + launch.GRACE + 2
    alive = lambda pid: Path(f"/proc/{pid}/stat").exists() and \
        Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"  # a zombie has ended
    pids = [int(pid) for pid in pids.read_text().split()]
    end = time.monotonic() + 2  # SIGKILL sent: the kernel's moment to end them
    while any(map(alive, pids)) and time.monotonic() < end:
        time.sleep(0.05)
    assert not any(map(alive, pids)), f"{pids} outlived the timeout"


def test_a_side_past_its_timeout_is_one_line_naming_the_ranks_behind(tmp_path, monkeypatch):
    out = tmp_path / "out"
    run.prepare(out)

    def rank0_done_then_timeout(argv, env, timeout):
        folder = out / "rank0" / "paddle"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "status.json").write_text('{"steps": 2}')
        (out / "rank1" / "paddle").mkdir(parents=True, exist_ok=True)
        raise subprocess.TimeoutExpired(argv, timeout)
    monkeypatch.setattr(launch, "script", rank0_done_then_timeout)
    with pytest.raises(PipelineError, match=r"^the Paddle script's rank 1 did not take 2 step\(s\) within --timeout "
                                            r"30 s \(rank 1 wrote no progress, its recorder never started\): every "
                                            r"process it started was ended; .*\[PC938\]$"):
        run.run_ranks("paddle", ["python"], out, STEPS, True, timeout=30)
    with pytest.raises(PipelineError, match=r"^the torch script did not take 2 step\(s\) within --timeout 30 s .*"
                                            r"\[PC938\]$"):
        run.run_side("torch", ["python"], out, STEPS, timeout=30)
    args = argparse.Namespace(steps=2, metric=None, timeout=0.0, layouts=None)
    with pytest.raises(PipelineError, match=r"^--timeout 0.0: give the seconds each script may take, above 0 "
                                            r"\[PC939\]$"):
        run.run_and_judge(args)


def test_a_ranks_progress_says_the_collective_it_waits_in(tmp_path):
    """progress.Beat: a collective entered is written as waited in, left as not; one interrupted inside (the
    timeout's SIGINT) leaves it waited in."""
    beat = progress.Beat(tmp_path, lambda: 1)
    seen = []

    def broadcast(x):
        seen.append(progress.read(tmp_path))
        if x is None:
            raise KeyboardInterrupt
        return x
    wrapped = beat.collective("broadcast", broadcast)
    assert wrapped(3) == 3 and seen[0]["waiting"] == "broadcast" and seen[0]["step"] == 1
    assert progress.read(tmp_path)["waiting"] is None and progress.read(tmp_path)["beats"] == 2
    with pytest.raises(KeyboardInterrupt):
        wrapped(None)
    beat.file.close()
    assert progress.read(tmp_path)["waiting"] == "broadcast"


def test_a_rank_that_hangs_is_named_not_the_ranks_waiting_on_it(tmp_path, monkeypatch):
    """At the timeout, of three ranks each one step in, rank 1 hung outside any collective while ranks 0 and 2 wait
    in the input's broadcast: rank 1 is named, they are said as waiting. Where every rank waits in a collective, the
    one that progressed least is named; a rank that never started (no folder: its marker's world says it is there)
    is named before the ranks waiting on it."""
    def stalled(markers: dict, world=3):
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        run.prepare(out)

        def ranks_stall(argv, env, timeout):
            for r, (beats, waiting, ago) in markers.items():
                folder = out / f"rank{r}" / "paddle"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / progress.PROGRESS).write_text(json.dumps(
                    {"beats": beats, "step": 1, "world": world, "at": time.time() - ago, "waiting": waiting}))
                (folder / "status.json").write_text('{"steps": 1}')  # as each rank's recorder wrote it as it ended
            raise subprocess.TimeoutExpired(argv, timeout)
        monkeypatch.setattr(launch, "script", ranks_stall)
        with pytest.raises(PipelineError) as e:
            run.run_ranks("paddle", ["python"], out, STEPS, True, timeout=25)
        return str(e.value)
    line = stalled({0: (9, "broadcast", 1), 1: (8, None, 21), 2: (9, "broadcast", 1)})
    assert re.fullmatch(r"the Paddle script's rank 1 did not take 2 step\(s\) within --timeout 25 s \(rank 1 made no "
                        r"progress for 2[12] s, in step 2 outside any collective; ranks 0, 2 waiting on it in "
                        r"broadcast\): every process it started was ended; .*\[PC938\]", line), line
    line = stalled({0: (5, "all_reduce", 20), 1: (6, "broadcast", 1), 2: (6, "broadcast", 1)})
    assert re.fullmatch(r"the Paddle script's rank 0 did not take .* \(rank 0 made no progress for 2[01] s, in step 2 "
                        r"inside all_reduce with the least progress; ranks 1, 2 waiting on it in broadcast\): .*"
                        r"\[PC938\]", line), line
    line = stalled({0: (6, "broadcast", 1), 1: (6, "broadcast", 1)})
    assert re.fullmatch(r"the Paddle script's rank 2 did not take .* \(rank 2 wrote no progress, its recorder never "
                        r"started; ranks 0, 1 waiting on it in broadcast\): .*\[PC938\]", line), line


def test_a_rank_that_dies_is_named_not_the_one_left_failing_in_a_collective(tmp_path, monkeypatch):
    """Rank 1 dies first; rank 0, waiting on it in a collective, fails after: the line names rank 1 (each rank's
    status as it ended, the first written first)."""
    out = tmp_path / "out"
    run.prepare(out)

    def rank1_dies_then_rank0(argv, env, timeout):
        for r in (1, 0):
            folder = out / f"rank{r}" / "paddle"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "status.json").write_text('{"steps": 0, "root": null, "config": {}, "error": null, "world": 2}')
            time.sleep(0.02)
        return 1
    monkeypatch.setattr(launch, "script", rank1_dies_then_rank0)
    with pytest.raises(PipelineError, match=r"^the Paddle script's rank 1 crashed \(exit 1; its traceback above\) "
                                            r"before it trained \[PC816\]$"):
        run.run_ranks("paddle", ["python"], out, STEPS, True)


def test_a_row_parallel_layer_told_its_input_is_whole_stops_in_one_line_naming_it():
    """pd_tp.py with down's input_is_parallel=False stops on torch's first batch inside down (its matmul given half
    the columns its rows take), measured under the launcher; the line made of that rank's trace so far."""
    trace = {"in/embed": 0, "out/embed": 0, "in/up": 0, "out/up": 0, "in/act": 0, "out/act": 0, "in/down": 0}
    error = ValueError("(InvalidArgument) In operator matmul, the [2] dimension of Input(X) must be equal to the [0] "
                       "dimension of Input(Y).\n  [Hint: ...]")
    line = split_ranks.stopped(0, 2, trace, error)
    assert line == ("rank 0 of 2: its model stopped in down on torch's first batch (ValueError: (InvalidArgument) In "
                    "operator matmul, the [2] dimension of Input(X) must be equal to the [0] dimension of Input(Y).): "
                    "a split layer was given another width than its shard's (input_is_parallel, gather_output) "
                    "[PC936]"), line
