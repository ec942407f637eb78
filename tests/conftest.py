"""Shared fixtures: a tiny random BERT home, a real MiniLM home, and a script runner.

Every pipeline script runs in a subprocess, as a user would run it, with
BERT_ALIGN_HOME pointing at a temporary folder so the repository's own results
are never touched.
"""
import portcheck.core.runtime  # first: offline mode, threads, allocator, before any test imports torch/paddle
import atexit
import contextlib
import fcntl
import io
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest

from bert_sst2 import paths

ROOT = paths.ROOT
SST2 = paths.SST2_DIR
# pytest.ini runs the suite on one pytest-xdist worker per core: each worker's scripts get their share of
# the cores, not every core, or two workers' two-thread processes wait on each other's time slices
# (torch's parallel regions suffer most: docs/bench/speed.md)
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
THREADS = str(max(1, len(os.sched_getaffinity(0)) // WORKERS))
# pytest.ini hands out whole files (--dist loadfile) in collection order, the next file to the first worker that
# is free; this puts the longest first, so the last file to start is a short one and the workers finish together.
# Seconds per file: its tests' CPU seconds (setup + call + teardown: this process's, its waited children's, and its
# fork servers' own and their children's, read from /proc: FORKED_RUNS' servers too), measured test by test in whole
# `python -m pytest` runs (two workers, THREADS 1) on a loaded 2-core AMD EPYC, the mean of two where the file did
# not change between them; a file under a second is 1. A file's figure holds the session fixtures it happened to
# build first (tiny_home, minilm_home, run_all_home). test_hand_in's is raised above the largest on purpose to send
# it first: it builds run_all_home, which test_step2 and test_step4 start from, before either begins (a worker
# needing it mid-build would wait), and needs no tiny home at its start, so the first two files do not both wait for
# the shared tiny home (shared_home).
FILE_SECONDS = {"test_hand_in.py": 72, "test_docs_blocks.py": 71, "test_resnet18.py": 53, "test_mid_size.py": 46,
                "test_distributed.py": 45, "test_run_launchers.py": 44, "test_run_trainers.py": 42,
                "test_run_scripts.py": 37, "test_split.py": 31, "test_bn_few_values.py": 29, "test_zoo_families.py": 25,
                "test_run_packed.py": 24, "test_edges.py": 22, "test_hostile84.py": 22, "test_kink_isolated.py": 22,
                "test_step5.py": 22, "test_run_paconvert_training.py": 20, "test_hostile5.py": 19,
                "test_hostile.py": 17, "test_inputs.py": 17, "test_k_backward.py": 17, "test_run_taking.py": 17,
                "test_docs_site.py": 16, "test_layout.py": 16, "test_zoo.py": 16, "test_run_config.py": 15,
                "test_five_steps.py": 14, "test_run_split.py": 14, "test_split_head.py": 13, "test_run_calls.py": 12,
                "test_stream_wide.py": 12, "test_pairing2.py": 11, "test_run_paconvert.py": 11,
                "test_global_settings.py": 10, "test_handin_steps.py": 10, "test_run_against_itself.py": 10,
                "test_step4.py": 10, "test_steps25.py": 10, "test_stream_hostile.py": 10, "test_zoo_training.py": 10,
                "test_plot.py": 9, "test_run_loaders.py": 9, "test_habits.py": 8, "test_run_first_kink.py": 8,
                "test_hand_in_kink.py": 6, "test_newcomer.py": 6, "test_run_forged.py": 6, "test_vision_ports.py": 6,
                "test_generate_families.py": 5, "test_hostile4.py": 5, "test_moe.py": 5, "test_root_tables.py": 5,
                "test_run_cycles.py": 5, "test_run_rnn.py": 5, "test_taken.py": 5, "test_parted.py": 5,
                "test_generate.py": 4, "test_hostile3.py": 4,
                "test_stream.py": 4, "test_bn_two_values.py": 3, "test_explorer.py": 3, "test_generate_folders.py": 3,
                "test_loose.py": 3, "test_pairing.py": 3, "test_ports.py": 3, "test_scaled.py": 3, "test_size.py": 3,
                "test_step1.py": 3, "test_step2.py": 3, "test_torchvision.py": 3, "test_view.py": 3,
                "test_architecture.py": 2, "test_compat_layouts.py": 2, "test_convert.py": 2, "test_diff.py": 2,
                "test_generate_seq2seq.py": 2, "test_grouping.py": 2, "test_layering.py": 2,
                "test_layouts_formers.py": 2, "test_library.py": 2, "test_loose_forms.py": 2, "test_loose_saved.py": 2,
                "test_models.py": 2, "test_moe_ties.py": 2, "test_weight_stats.py": 2, "test_zoo_paconvert.py": 2,
                "test_zoo_vision.py": 2,
                "test_align.py": 1, "test_bench_pages.py": 1, "test_contestant.py": 1, "test_docs.py": 1,
                "test_docs_prose.py": 1, "test_draws.py": 1, "test_engine.py": 1, "test_first_call.py": 1,
                "test_flags.py": 1, "test_forward_cost.py": 1, "test_fused_restart.py": 1, "test_generate_handin.py": 1,
                "test_generate_origin.py": 1, "test_generate_padding.py": 1, "test_generate_window.py": 1,
                "test_head_on_two_levels.py": 1, "test_index_tables.py": 1, "test_keys.py": 1, "test_kink_branch.py": 1,
                "test_kink_fused_act.py": 1, "test_links.py": 1, "test_messages.py": 1, "test_moe_saved.py": 1,
                "test_no_traceback.py": 1, "test_one_sided.py": 1, "test_own_layout.py": 1, "test_packed_rnn.py": 1,
                "test_padded_elsewhere.py": 1, "test_pasted.py": 1, "test_pointwise.py": 1, "test_pooler_linear.py": 1,
                "test_regroup.py": 1, "test_replayed_lines.py": 1, "test_root_own.py": 1, "test_rules.py": 1,
                "test_run_limits.py": 1, "test_shapes_shared.py": 1, "test_sibling_branches.py": 1,
                "test_square_router.py": 1, "test_step3.py": 1, "test_tensor_data.py": 1, "test_torch_fused.py": 1,
                "test_user_verdicts.py": 1, "test_wording.py": 1, "test_zoo_formers_generation.py": 1,
                "test_zoo_generation.py": 1, "test_zoo_reasons.py": 1}
# A file missing from FILE_SECONDS (a new one) is placed as a file of this many seconds: after the long files, before
# the short ones, whose ~200 s then even out the workers' ends whatever it takes. Placed last (0), a new file of 30 s
# starts when the other worker has a second or two left, and that worker waits out the rest.
UNTIMED = 15
SETUP = ["weights/torch_bert_weights.py", "weights/torch2paddle.py",
         "classifier_weights/generate_classifier_weights.py", "fake_data/gen_fake_data.py"]


# The pipeline's checks and check_pair import no framework (test_layout.test_checks_load_no_framework): run()
# runs them in this process, as inproc, without an interpreter's and numpy's start-up and check_step5's matplotlib
# import each time (0.4 to 2 s a run, ~100 runs a suite). A run with a plant or its own environment is a process.
IN_PROCESS = re.compile(r"pipeline/(Step\d/check_step\d|check_log_reprod|check_pair)\.py")
# A script of one framework's side (torch's pt_*.py, Paddle's pd_*.py) runs as a child forked by a process that has
# imported that framework once (tests/forkserver.py), not as a new interpreter importing it again: the same bytes
# written, 37% less CPU in tests/test_edges.py (135 -> 85 s). PORTCHECK_TESTS_FORK=0: every script a new interpreter.
FORK = os.environ.get("PORTCHECK_TESTS_FORK", "1") != "0"
FORKED = {"pt_": "torch", "pd_": "paddle"}
# the setup scripts import torch, then Paddle (torch2paddle: torch's twin first), or neither: forked by torch's server
# in that order too (a tiny home built: 19 -> 12 s of CPU, its process and the server counted)
FORKED_SETUP = dict.fromkeys(SETUP, "torch")
# the ResNet example's weights step (torch's export, then its conversion, which imports torch first too), Step 5's
# yardstick (torch_vs_torch.py, which starts torch's own runs as processes of their own at one thread each) and its
# checks (no framework imported: a child of either server is an interpreter's start-up and numpy's import saved)
FORKED_SETUP |= dict.fromkeys(["examples/resnet18/export_weights.py", "examples/resnet18/convert_weights.py",
                               "examples/resnet18/Step5/torch_vs_torch.py",
                               *(f"examples/resnet18/Step{n}/check_step{n}.py" for n in range(1, 6))], "torch")
# the examples the docs' blocks run (the README's first green, examples.md's frameworks' own LSTM pair), which import
# both frameworks: torch's import saved (~2 s of CPU each); .ci/run runs both as processes of their own, in the venv
# holding only numpy, torch and paddlepaddle
FORKED_SETUP |= dict.fromkeys(["examples/quickstart.py", "examples/builtin_pair.py"], "torch")
# the scripts that import their side's data module (pt_data.py, pd_data.py): its third-party imports made before the
# fork too (transformers' and datasets', paddlenlp's: 3.5 and 5.5 s of CPU), by a server of their own; Step 4's
# schedules (_lr.py) too, which import the same packages (transformers' and paddlenlp's schedulers)
DATA_SCRIPTS = ("_train.py", "_data_loader.py", "_metric.py", "_lr.py")


def run(script, *args, home, plant=None, cwd="/tmp", check=None, env=None):
    """Run a repo script (path relative to the root) under BERT_ALIGN_HOME=home.

    plant: a bug name from tests/plant.py to plant before the script runs.
    check: expected return code, asserted with the output shown on mismatch.
    """
    cmd = [sys.executable]
    cmd += [str(ROOT / "tests" / "plant.py"), plant] if plant else []
    cmd += [str(ROOT / script), *map(str, args)]
    framework = FORKED.get(Path(script).name[:3], FORKED_SETUP.get(str(script))) if FORK and env is None else None
    if plant is None and env is None and IN_PROCESS.fullmatch(str(script)):
        proc = inproc(script, *args, home=home, cwd=cwd)
    elif FORK and plant is None and env is None and str(script) in RUN_ALLS:
        proc = run_all(script, *args, home=home, cwd=cwd)
    elif FORK and plant is None and env is None and str(script) == OWN_RUNS and THREADS == "1" and server("torch"):
        proc = own_runs(script, *args, home=home, cwd=cwd)
    elif framework and (forker := server(framework, *(
            [f"bert_sst2/twins/{Path(script).name[:3]}data.py"]
            if str(script).startswith("pipeline/") and str(script).endswith(DATA_SCRIPTS) else []))):
        proc = forked(forker, cmd, home=home, cwd=cwd)
    else:
        env = dict(os.environ, BERT_ALIGN_HOME=str(home), **SCRIPT_ENV, **(env or {}))
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check is not None:
        assert proc.returncode == check, f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


SCRIPT_ENV = {"PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": THREADS}  # what run() adds to a script's environment
PER_RUN = ("BERT_ALIGN_HOME", "PYTEST_CURRENT_TEST")  # what a fork server's child sets itself (pytest: each test's id)
# what a test importing a framework in this process leaves in its environment, each the value a script's own import
# sets (paddle.base.core's CUSTOM_DEVICE_ROOT, with no custom device; joblib's and sklearn's setdefault, under
# paddlenlp and datasets): not a change of the script's environment. Counted as one, every later script of the worker
# ran as a new interpreter (tests/test_step2.py's plants after its in-process imports: 8 s each, not 1).
SET_BY_IMPORTS = {"CUSTOM_DEVICE_ROOT": "", "KMP_DUPLICATE_LIB_OK": "True", "KMP_INIT_AT_FORK": "FALSE"}
SERVERS = {}  # (framework, preload...) -> (its tests/forkserver.py process, started at its first script, its env)


def server(framework, *preload):
    """The framework's fork server (preload: the files whose third-party imports it makes too), when its environment
    is the one a script run now would have (PER_RUN and SET_BY_IMPORTS aside); None when the tests' environment has
    changed since it started (monkeypatch)."""
    env = {k: v for k, v in dict(os.environ, **SCRIPT_ENV).items()
           if k not in PER_RUN and SET_BY_IMPORTS.get(k, object()) != v}
    proc, had = SERVERS.get((framework, *preload), (None, None))
    if proc is None or proc.poll() is not None:
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "forkserver.py"), framework,
                                 *(str(ROOT / path) for path in preload)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                cwd="/tmp", env=env)
        SERVERS[(framework, *preload)], had = (proc, env), env
    return proc if had == env else None


# A pipeline's run_all.py runs in this process (inproc: its flags, its table, its summary), each of its steps' scripts
# through run() as a test would run that script alone (forked, or here), not as an interpreter of its own importing
# its framework again: the same files written, as run_all's own run_script would have them written. Step 5's two
# trainings (SideBySide) one after the other, each as run_side_by_side gives it (OMP_NUM_THREADS its share's cores,
# the threads a fork server's framework has: THREADS), or as processes of their own where those differ (-n 0).
RUN_ALLS = {"pipeline/run_all.py", "examples/resnet18/run_all.py"}


def run_all(script, *args, home, cwd="/tmp", plants=None):
    """A run_all.py run as run() runs it (RUN_ALLS); plants: {a step script's file name: the bug planted in it}."""
    from portcheck.pipeline import steps
    plants = plants or {}

    def step_script(cmd) -> int:  # its output where the script's own process writes: run_all's stdout and stderr
        proc = run(cmd[0], *cmd[1:], home=home, cwd=os.getcwd(), plant=plants.get(Path(cmd[0]).name))
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        return proc.returncode

    def run_script(cmd, root):
        assert Path(root) == ROOT, root
        print(f"\n$ python {' '.join(cmd)}", flush=True)
        started = time.time()
        return step_script(cmd), time.time() - started, cmd

    def run_side_by_side(group, root):
        shares = steps.core_shares(len(group.cmds))
        if any(str(len(share)) != THREADS for share in shares):
            assert not any(Path(cmd[0]).name in plants for cmd in group.cmds), plants
            return real_side_by_side(group, root)
        started = time.time()
        for cmd, share in zip(group.cmds, shares):
            print(f"\n$ python {' '.join(cmd)}   # cores {','.join(map(str, share))}, side by side", flush=True)
            if code := step_script(cmd):
                return code, time.time() - started, cmd
        return 0, time.time() - started, None

    real_side_by_side = steps.run_side_by_side
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(steps, "run_script", run_script)
        mp.setattr(steps, "run_side_by_side", run_side_by_side)
        return inproc(script, *args, home=home, cwd=cwd)


# The ResNet example's Step 5 yardstick (torch_vs_torch.py) starts pt_train.py again from moved weights, each an
# interpreter of its own at one thread (`python -c PRELUDE`), two at a time: 8.5 s of CPU each, 7.8 of them imports.
# Here the script runs in this process and each of its runs is forked by torch's server, one after the other, where
# that server's torch has one thread too (THREADS: two workers on two cores, as CI runs); else as the script runs them.
OWN_RUNS = "examples/resnet18/Step5/torch_vs_torch.py"


def own_runs(script, *args, home, cwd="/tmp"):
    """torch_vs_torch.py run as run() runs it (OWN_RUNS): its subprocess.Popen of a run, a run forked and done."""
    from examples.resnet18.Step5 import torch_vs_torch
    forker, popen = server("torch"), subprocess.Popen

    class Done:  # what finish() asks of a started run: it has ended
        def __init__(self, code):
            self.returncode = code

        def poll(self):
            return self.returncode

        wait = poll

        def terminate(self):
            pass

    with tempfile.TemporaryDirectory() as tmp:
        prelude = Path(tmp, "prelude.py")
        prelude.write_text(torch_vs_torch.PRELUDE)

        def forked_run(cmd, env, stdout=None, preexec_fn=None, **kwargs):
            if cmd[:3] != [sys.executable, "-c", torch_vs_torch.PRELUDE]:
                return popen(cmd, env=env, stdout=stdout, preexec_fn=preexec_fn, **kwargs)
            assert env["OMP_NUM_THREADS"] == THREADS and stdout == subprocess.DEVNULL and not kwargs, (env, kwargs)
            code, _, err = ask(forker, [str(prelude), *cmd[3:]], os.getcwd(),
                               {k: env.get(k) for k in PER_RUN} | {"BERT_ALIGN_HOME": env["BERT_ALIGN_HOME"]})
            sys.stderr.write(err.decode())  # where the run's own process writes its errors: the script's stderr
            return Done(code)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(subprocess, "Popen", forked_run)
            return inproc(script, *args, home=home, cwd=cwd)


def ask(server, argv, cwd, env, **request) -> tuple:
    """argv run by a fork server as its child, env set in it (None: unset): (exit status, stdout, stderr bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp, "out"), Path(tmp, "err")
        server.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd), "env": env, "out": str(out), "err": str(err),
                                       **request}) + "\n")
        server.stdin.flush()
        answer = server.stdout.readline()
        assert answer, f"the fork server ended: {' '.join(argv)}"
        return int(answer), out.read_bytes(), err.read_bytes()


def forked(server, cmd, home, cwd):
    """cmd run by a fork server (FORK): (exit status, stdout, stderr) as subprocess.run gives them."""
    env = {k: os.environ.get(k) for k in PER_RUN} | {"BERT_ALIGN_HOME": str(home)}
    code, out, err = ask(server, cmd[1:], cwd, env)
    return subprocess.CompletedProcess(cmd, code, out.decode(), err.decode())


# The files whose `portcheck run` scripts (launch.script: a user's `python script.py`, its recorder injected) run as
# children of a fork server that has imported the side's framework and PRELOADED (--bare: not portcheck.runtime,
# which no user's script imports), under the environment run gives the script: a session of its own, its group
# ended, the injected sitecustomize run first, as at an interpreter's start-up. 9.6 of a tiny torch script's 11.9 s
# of CPU were imports (torch, the torch._dynamo its first optimizer step imports, scikit-learn's datasets). The
# files that send signals, launch ranks or try hostile scripts keep processes of their own; test_hostile5's signals
# go to `portcheck run` commands that are processes of their own, and its scripts that fork, start processes or
# replace their stdout are forked as any (the server ends the script's group, as launch.script does).
FORKED_RUNS = {"test_run_scripts.py", "test_run_config.py", "test_run_trainers.py", "test_run_loaders.py",
               "test_run_limits.py", "test_run_cycles.py", "test_run_taking.py", "test_run_against_itself.py",
               "test_run_rnn.py", "test_run_first_kink.py", "test_hand_in_kink.py", "test_run_packed.py",
               "test_run_calls.py", "test_hostile5.py", "test_run_forged.py", "test_run_split.py",
               "test_run_paconvert.py", "test_run_paconvert_training.py"}
# imported before the fork beside the framework: what the tests' scripts import that never touches torch's or
# Paddle's functions (the recorder wraps those at its start-up, after which a module binding one at its import
# would hold the wrapped one)
PRELOADED = ["sklearn.datasets"]


def forked_script(argv, env, timeout=None):
    """launch.script's twin for FORKED_RUNS: `python file.py ...` forked by its framework's server (no timeout: the
    suite's scripts end); anything else (a launcher, -m, another interpreter) as launch.script runs it."""
    from portcheck.scripts import launch, side_files
    if not (FORK and len(argv) > 1 and argv[0] == sys.executable and argv[1].endswith(".py")
            and side_files.SETTINGS in env):
        return launch.SCRIPT(argv, env, timeout)
    settings = json.loads(env[side_files.SETTINGS])
    framework = "paddle" if settings.get("framework", settings["side"]) == "paddle" else "torch"
    own = (side_files.SETTINGS, *PER_RUN)  # each script's own: the one server of an environment serves them all
    base = {k: v for k, v in env.items() if k not in own}
    key = ("--bare", framework, tuple(sorted(base.items())))
    proc = SERVERS.get(key, (None,))[0]
    if proc is None or proc.poll() is not None:
        for other in [k for k in SERVERS if k[:2] == key[:2]]:  # another environment's (a test's own): ~0.5 GB each
            stale, _ = SERVERS.pop(other)
            stale.stdin.close()
            stale.wait()
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "forkserver.py"), "--bare", framework,
                                 *(f"--import={m}" for m in PRELOADED)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                cwd="/tmp", env=base)
        SERVERS[key] = (proc, base)
    code, out, err = ask(proc, argv[1:], os.getcwd(), {k: env.get(k) for k in own}, session=True,
                         site=str(launch.INJECT / "sitecustomize.py"))
    os.write(1, out)  # where the script's own process writes: this one's stdout and stderr
    os.write(2, err)
    return code


@pytest.fixture(scope="module", autouse=True)
def _forked_runs(request):
    if request.path.name not in FORKED_RUNS:
        yield
        return
    from portcheck.scripts import launch
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(launch, "SCRIPT", launch.script, raising=False)
        mp.setattr(launch, "script", forked_script)
        yield


# `python -m portcheck check` on a `portcheck run` hand-in agrees with the run that wrote it (issue 61 item 10): every
# judge a test_run_* file makes, its plants and clean runs, is followed by the checker on the folder it handed in,
# which must exit as run did and say the same configuration lines, the same ones red. No run of its own: ~0.05 s each.
LINES = ("  DIFFERS ", "  NOT COMPARED ", "  ONE-SIDED ")
CONFIG_RED = re.compile(r"(?:^RED: |^config: RED \| )(\d+) configuration difference\(s\)", re.M)


def agrees(code: int, said: str, top: Path):
    from portcheck import cli
    from portcheck.scripts import run as portcheck_run
    from portcheck.scripts import runconfig
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        red = cli.check(top, only=",".join((runconfig.CONFIG, *portcheck_run.PAIRS)))
    checked = printed.getvalue()
    lines = lambda text: sorted(s for s in text.splitlines() if s.startswith(LINES))
    count = lambda text: int((CONFIG_RED.search(text) or [0, 0])[1])
    assert (bool(red), count(checked), lines(checked)) == (bool(code), count(said), lines(said)), \
        f"portcheck check {top} does not say what run said\n--- run (exit {code}):\n{said}\n--- check:\n{checked}"


@pytest.fixture(scope="module", autouse=True)
def _check_agrees_with_run(request):
    if not request.path.name.startswith("test_run_"):
        yield
        return
    import time
    from portcheck.scripts import run as portcheck_run
    from portcheck.scripts import runconfig

    def judge(out, *args, **kwargs):
        started, printed = time.time_ns(), io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                code = judged(out, *args, **kwargs)
        finally:  # where the test reads it, a refusal's too
            print(printed.getvalue(), end="")
        handed = Path(out) / "log_reprod" / "diagnostics" / f"{runconfig.CONFIG}_torch.json"
        if handed.is_file() and handed.stat().st_mtime_ns >= started:  # a run red before its hand-in writes none
            agrees(code, printed.getvalue(), Path(out) / "log_reprod")
        return code
    judged = portcheck_run.judge
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(portcheck_run, "judge", judge)
        yield


@pytest.fixture(scope="session", autouse=True)
def _worker_threads():
    """A pytest-xdist worker's own torch (a test's in-process model, imported by the test files it collected) at the
    worker's share of the cores, as its scripts are (THREADS), not every core that portcheck.core.runtime gave it:
    two workers' two-thread parallel regions on two cores wait on each other's time slices (docs/bench/speed.md). -n 0:
    every core, as before. Its Paddle too: portcheck.core.runtime set OMP_NUM_THREADS to every core before the worker
    imported it (at 2 threads beside the other worker, a conv took 5.4 s of CPU where 1 thread took 3.9)."""
    if "PYTEST_XDIST_WORKER" in os.environ and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(THREADS))
    if "PYTEST_XDIST_WORKER" in os.environ and "paddle" in sys.modules:
        sys.modules["paddle"].base.core.set_num_threads(int(THREADS))
    yield


@pytest.fixture
def two_threads():
    """torch in this process at the 2 threads tools/kink_nets.py's nets were found at (its run against
    itself, other_threads: 1), as their tests ran before a worker's torch took its share of the cores (_worker_threads):
    from 1 thread (2 against itself) the kink is not crossed, and those tests would pass without one or fail."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)


# (seed, batch) of tools/kink_nets.py's nets, bounded, tried in order: a net where Paddle alone crosses a
# ReLU kink in a later step's forward, its records alone red, green once torch's run takes Paddle's side of it. Which
# net's kink a CPU's kernels cross depends on the CPU (ATEN_CPU_CAPABILITY); measured on an AMD EPYC at 2 threads:
# (7, 8) (KINK_NETS["oneDNN off"]) under avx512 and avx2, (13, 16) under default (seeds 0-24 at batches 8 and 16
# swept there: the only one)
PADDLE_ALONE_KINK = ((7, 8), (13, 16))


def paddle_alone_kink(paddle_runs):
    """The first PADDLE_ALONE_KINK net where this CPU's Paddle (paddle_runs[0]: plain momentum SGD) crosses a later
    step's kink torch's run against itself does not (the scenario, asserted): ((seed, batch), judged's report of it,
    kink_nets.kink_records' records: torch's, one per paddle_runs, torch's run again taking Paddle's side)."""
    from portcheck import judge_backward
    from portcheck.gradients.backward import judged
    from tools import kink_nets
    tried = []
    for seed, batch in PADDLE_ALONE_KINK:
        records = kink_nets.kink_records(seed, batch, kink_nets.sgd("torch"), paddle_runs)
        t, clean, again = records[0], records[1], records[-1]
        alone, report = judge_backward(t, clean), judged(t, clean, again=again)
        tried.append((seed, batch, alone.passed, [(c.step, c.module, len(c.index)) for c in report.crossed]))
        if not alone.passed and report.passed and report.taken and min(c.step for c in report.crossed) >= 1:
            return (seed, batch), report, records
    pytest.fail(f"no net of PADDLE_ALONE_KINK has a later kink only Paddle crosses on this CPU: {tried}")


@atexit.register
def _stop_servers():
    for proc, _ in SERVERS.values():
        proc.stdin.close()
        proc.wait()


def inproc(script, *args, home, cwd=None):
    """Run a repo script's __main__ in this process under BERT_ALIGN_HOME=home, as a process would: its exit code,
    stdout and stderr (an uncaught exception's traceback there, exit 1); only for scripts that end before they
    import a framework (flag and path checks) or never import one (IN_PROCESS)."""
    out, err, code = io.StringIO(), io.StringIO(), 0
    # the whole environment restored after: a run_all.py run here sets BERT_ALIGN_REAL_DATA for its steps (--data_dir),
    # and a variable left behind stops every fork server serving the tests after it (server(): 64 -> 200 s of edges)
    saved = sys.argv, dict(os.environ), os.getcwd()
    sys.argv = [str(ROOT / script), *map(str, args)]
    os.environ["BERT_ALIGN_HOME"] = str(home)
    os.chdir(cwd or "/tmp")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(str(ROOT / script), run_name="__main__")
            except SystemExit as e:
                if isinstance(e.code, str):
                    print(e.code, file=err)
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:
                traceback.print_exc(file=err)
                code = 1
    finally:
        sys.argv = saved[0]
        os.chdir(saved[2])
        os.environ.clear()
        os.environ.update(saved[1])
    return subprocess.CompletedProcess([sys.executable, str(ROOT / script), *map(str, args)], code,
                                       out.getvalue(), err.getvalue())


# One module of this file for the whole run, the one pytest loaded: collecting tests/formers/ (its own conftest,
# skipped outside its venv) takes "conftest" out of sys.modules, and each test file's `from conftest import ...` then
# loaded this file again as a second module, its own SERVERS beside the fixtures' (a worker's torch, Paddle and data
# fork servers each started twice: ~14 s of CPU a worker for their imports, and their memory)
_THIS = sys.modules[__name__]


def pytest_collectstart(collector):
    sys.modules["conftest"] = _THIS


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -FILE_SECONDS.get(item.path.name, UNTIMED))  # stable: each file keeps its own order


def error_line(proc) -> str:
    """The script's one `error:` line, which must end its stderr (Paddle prints its own notices above it)."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr
    return errors[0]


def make_home(path, *export_args):
    """SETUP's scripts run in path (export_args: the first one's), each to exit 0; what each printed is kept beside
    the home (setup_runs)."""
    procs = [run(script, *(export_args if script == SETUP[0] else ()), home=path, check=0) for script in SETUP]
    Path(f"{path}.setup.json").write_text(json.dumps([[p.args, p.returncode, p.stdout, p.stderr] for p in procs]))
    return path


def setup_runs(home) -> dict:
    """{SETUP's script: its CompletedProcess} of the make_home that built home."""
    procs = json.loads(Path(f"{home}.setup.json").read_text())
    return dict(zip(SETUP, (subprocess.CompletedProcess(*p) for p in procs)))


def built_once(tmp_path_factory, name, build):
    """A read-only folder built once per suite run by build(folder): the first xdist worker to need it builds it,
    the others wait on a lock and reuse it (a session fixture is otherwise built once per worker)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base  # parent: this run's, shared by workers
    path, built = root / name, root / f"{name}.built"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.is_file():
            shutil.rmtree(path, ignore_errors=True)  # what a worker that failed half-way left
            path.mkdir()
            build(path)
            built.touch()
    return path


def shared_home(tmp_path_factory, name, *export_args):
    """A read-only home built once per suite run (~20 s)."""
    return built_once(tmp_path_factory, name, lambda path: make_home(path, *export_args))


@pytest.fixture(scope="session")
def tiny_home(tmp_path_factory):
    """A read-only template: tiny random BERT (2 layers, hidden 32) weights, head and fake data.

    tiny_config.json uses initializer_range 0.1, not BERT's 0.02: with 0.02 a
    2-layer random model attends almost uniformly and its logits are ~1e-3, so a
    transposed query weight moves them less than fp32 noise would on a real model.
    At 0.1 the logits are ~0.2 like MiniLM's and each planted bug shows (measured:
    clean 1.2e-7, LayerNorm eps 5.7e-6, transposed query 8e-3, no mask 0.1).
    """
    return shared_home(tmp_path_factory, "tiny", "--random_init", "--config", ROOT / "tests/tiny_config.json")


def private_copy(home, tmp_path, linked=()):
    """A copy of a read-only home (a module or session fixture's) that one test may break. The files whose names end
    with one of `linked` are hard links to the home's, not copies: only for files the test writes through the
    pipeline's writers alone, which replace a file (fileio.atomic_write) and never write into it (unchanged())."""
    def copy(src, dst):
        return os.link(src, dst) if src.endswith(tuple(linked)) else shutil.copy2(src, dst)
    shutil.copytree(home, tmp_path / "home", copy_function=copy)
    return tmp_path / "home"


def unchanged(home, linked) -> dict:
    """What private_copy(home, linked=linked) links, by each file's size and time written: a module fixture asserts
    it unchanged after its tests (a write into a link, not a replace, would have changed its home's file)."""
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in Path(home).rglob("*") if p.name.endswith(linked)}


@pytest.fixture
def home(tiny_home, tmp_path):
    """A private copy of the tiny home that a test may break."""
    return private_copy(tiny_home, tmp_path)


@pytest.fixture(scope="session")
def run_all_home(tmp_path_factory):
    """One green `run_all.py` on the tiny model from an empty home, built once per suite run (it takes minutes):
    (home, its CompletedProcess) (read-only; copy before breaking). tests/test_hand_in.py judges the run; the Step 2
    and Step 4 tests start from the results its scripts wrote (step_sides)."""
    def build(folder):
        home = folder / "home"
        home.mkdir()
        # the default data, as a fresh clone runs it: Step 2 and a Step 5 smoke run on the demo set. The committed
        # reference run exercises --data_dir end to end; test_run_all_passes_data_dir checks the plumbing.
        proc = run("pipeline/run_all.py", "--random_init", ROOT / "tests/tiny_config.json", "--max_steps", 6,
                   "--deterministic", home=home)
        (folder / "proc.json").write_text(json.dumps([proc.args, proc.returncode, proc.stdout, proc.stderr]))
    folder = built_once(tmp_path_factory, "run_all", build)
    return folder / "home", subprocess.CompletedProcess(*json.loads((folder / "proc.json").read_text()))


def step_sides(run_all_home, folder, step, pairs):
    """A home in `folder` holding what a fresh tiny home holds (weights, head, fake data) and the torch and Paddle
    results of one step's pairs, as run_all_home's run of that step's scripts wrote them, its check not yet run:
    what running those scripts without flags in a copy of tiny_home writes (run_all gives Steps 1-4 no flags; the
    same weights, so the same run records)."""
    home, proc = run_all_home
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("weights", "classifier_weights", "fake_data"):
        shutil.copytree(home / name, folder / name)
    (folder / f"pipeline/Step{step}").mkdir(parents=True)
    for pair in pairs:
        for side in ("torch", "paddle"):
            for suffix in (".npy", ".run.json"):
                name = f"pipeline/Step{step}/{pair}_{side}{suffix}"
                shutil.copy(home / name, folder / name)
    return folder


STEP5_TRAIN = ("pipeline/Step5/pt_train.py", "pipeline/Step5/pd_train.py")  # torch's training, Paddle's
# Step 5's deterministic pair: at lr 1e-3 a Paddle weight decay on LayerNorm and bias shows in the norm ratios, and
# batches of 8 grouped by length make 5 steps of the demo set; the clean pair is green all the same
STEP5_PAIR = ["--demo", "--deterministic", "--lr", "1e-3", "--max_steps", 10, "--batch_size", 8, "--group_by_length",
              "--log_every", 1]


@pytest.fixture(scope="session")
def deterministic_pair(tiny_home, tmp_path_factory):
    """The tiny home after both Step 5 trainings ran with STEP5_PAIR, built once per suite run (read-only: copy it):
    tests/test_step5.py's smoke and weight-statistics tests and tests/test_grouping.py's grouped run plant their
    bug in the Paddle side of a copy."""
    def build(home):
        shutil.copytree(tiny_home, home, dirs_exist_ok=True)
        for script in STEP5_TRAIN:
            assert "group_by_length" not in run(script, *STEP5_PAIR, home=home, check=0).stderr  # taken, not warned of
    return built_once(tmp_path_factory, "step5_pair", build)


@pytest.fixture(scope="session")
def minilm_home(tmp_path_factory):
    """The real all-MiniLM-L6-v2 weights, exported and converted (read-only): SETUP's scripts with no flags, as the
    README's first block runs them (tests/test_docs_blocks.py takes their runs from here: setup_runs)."""
    return shared_home(tmp_path_factory, "minilm")


# examples/builtin_pair.py writes nothing: one run of it, as a block's line runs it (a new interpreter in an empty
# folder), is asserted by tests/test_pairing.py (its verdicts) and tests/test_docs_blocks.py (docs/examples.md's
# lines): one interpreter importing torch and Paddle and running the pair, not two (~5 s of CPU)
BUILTIN_PAIR = "examples/builtin_pair.py"


@pytest.fixture(scope="session")
def builtin_pair_run(tmp_path_factory):
    """BUILTIN_PAIR's CompletedProcess, run once per suite run in an empty folder."""
    def build(folder):
        (folder / "cwd").mkdir()
        proc = run(BUILTIN_PAIR, home=folder / "home", cwd=folder / "cwd")
        (folder / "proc.json").write_text(json.dumps([proc.args, proc.returncode, proc.stdout, proc.stderr]))
        assert not any((folder / "cwd").iterdir()), "it writes nothing"
    folder = built_once(tmp_path_factory, "builtin_pair", build)
    return subprocess.CompletedProcess(*json.loads((folder / "proc.json").read_text()))


def plant_values(path, data):
    """A planted bug in one side's values, as its script would have written it: the .npy and its run record,
    bound to the new file (a bare edit leaves a record that no longer describes its result: a stale result,
    red for that reason alone)."""
    from portcheck.core import record
    from portcheck.core.fileio import save_npy
    save_npy(path, data)
    was = record.load(path)
    record.save(path, was["framework"], was["script"], was["depends"])
