"""What a new user met on a first run (issue 51), each fixed and held: the run records of the README's own flow
fingerprint each side's own weights, check_pair finds a hand-in's records in diagnostics/, the demo hand-in's
train_align line says it was a smoke run, `pip install ./lib` leaves lib/ clean, and a time states its machine
and load. Each test plants what it guards against and asserts red."""
import json
import os
import shutil
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from bert_sst2 import paths
from conftest import run

ROOT = paths.ROOT


# ---- each side's own weights ----------------------------------------------------------------------------------

def renamed_pair():
    """A torch model and its Paddle port under other module names (what convert pairs without a map)."""
    import paddle
    import torch
    torch.manual_seed(0)
    t = torch.nn.Sequential()
    t.add_module("proj", torch.nn.Linear(4, 3))
    t.add_module("norm", torch.nn.BatchNorm1d(3))
    p = paddle.nn.Sequential()
    p.add_sublayer("fc", paddle.nn.Linear(4, 3))
    p.add_sublayer("bn", paddle.nn.BatchNorm1D(3))
    return t.eval(), p.eval()


def test_each_side_fingerprints_its_own_weights_under_torchs_names(tmp_path):
    from portcheck import convert
    from portcheck.core import record
    from portcheck.pipeline.handin import save_side
    t, p = renamed_pair()
    port = convert(t, p, inputs=np.ones((2, 4), "float32"))
    weights = [record.model_fingerprint(m, port=port) for m in (t, p)]
    assert weights[0] == weights[1]
    assert record.model_fingerprint(p) != weights[1]  # without the port: Paddle's names, not comparable
    p.fc.weight.set_value(p.fc.weight.numpy() + 1e-3)  # planted: the Paddle side holds other weights
    planted = record.model_fingerprint(p, port=port)
    assert planted != weights[0]
    for side, fingerprint in (("torch", weights[0]), ("paddle", planted)):
        save_side(tmp_path, "forward", side, {"logits": np.full(3, len(side), "float32")}, {"weights": fingerprint},
                  "x.py")
    same, detail = record.same_run(tmp_path / "forward_torch.npy", tmp_path / "forward_paddle.npy")
    assert same is False and "weights differs" in detail


def test_the_readme_flow_records_each_sides_own_weights():
    """examples/quickstart.py (the README's first green) hands in through Handin, whose Paddle side's record
    fingerprints the Paddle model (test_handin_steps: a Paddle model of other weights is not the same run)."""
    script = (ROOT / "examples" / "quickstart.py").read_text()
    assert "steps.forward(torch_model, paddle_model, x)" in script
    assert "model_fingerprint(torch_model)" not in script


# ---- check_pair on a hand-in's files ------------------------------------------------------------------------------

def pair(*files):
    return subprocess.run([sys.executable, str(ROOT / "pipeline" / "check_pair.py"), *map(str, files)],
                          capture_output=True, text=True)


def test_check_pair_finds_a_hand_ins_records_in_diagnostics(tmp_path):
    hand_in = ROOT / "log_reprod"
    proc = pair(hand_in / "forward_torch.npy", hand_in / "forward_paddle.npy")
    assert proc.returncode == 0 and "same run: passed" in proc.stdout, proc.stdout + proc.stderr
    assert "no run records" not in proc.stdout
    # planted: the Paddle side's record in diagnostics/ says other weights
    copy = tmp_path / "log_reprod"
    shutil.copytree(hand_in, copy)
    record_path = copy / "diagnostics" / "forward_paddle.run.json"
    rec = json.loads(record_path.read_text())
    rec["depends"]["weights"] = "0" * 64
    record_path.write_text(json.dumps(rec))
    proc = pair(copy / "forward_torch.npy", copy / "forward_paddle.npy")
    assert proc.returncode == 1 and "weights differs" in proc.stdout, proc.stdout + proc.stderr


# ---- the demo hand-in's train_align line ------------------------------------------------------------------------

@pytest.mark.parametrize("smoke", [True, False])
def test_a_smoke_run_says_so_on_its_train_align_line(tmp_path, smoke):
    copy = tmp_path / "log_reprod"
    shutil.copytree(ROOT / "log_reprod", copy)
    if smoke:  # what --demo records: trained and evaluated on the same rows
        for side in ("torch", "paddle"):
            path = copy / "diagnostics" / f"train_align_{side}.run.json"
            rec = json.loads(path.read_text())
            rec["depends"]["dev_rows"] = rec["depends"]["train_rows"]
            path.write_text(json.dumps(rec))
    proc = run("pipeline/check_log_reprod.py", copy, home=tmp_path / "home")
    line = next(line for line in proc.stdout.splitlines() if line.startswith("train_align:"))
    assert ("SMOKE RUN on demo data, not evidence" in line) == smoke, line


# ---- pip install ./lib ------------------------------------------------------------------------------------------

def built(lib):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the backend is the copy's own (backend-path)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(lib.parent / "wheels"), str(lib)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return sorted(p.name for p in lib.iterdir())


def test_installing_the_library_leaves_its_folder_clean(tmp_path):
    lib = tmp_path / "lib"
    shutil.copytree(ROOT / "lib", lib, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    before = sorted(p.name for p in lib.iterdir())
    assert built(lib) == before
    assert list((tmp_path / "wheels").glob("portcheck-*.whl"))
    # planted: setuptools' own backend, as before, builds in the folder
    toml = lib / "pyproject.toml"
    toml.write_text(toml.read_text().replace('build-backend = "clean_build"', 'build-backend = "setuptools.build_meta"')
                    .replace('backend-path = ["."]', ''))
    assert {"build", "portcheck.egg-info"} & set(built(lib))


# ---- a time states its machine and load -------------------------------------------------------------------------

def test_a_timed_run_records_its_machine_and_load(tmp_path, monkeypatch):
    from examples.resnet18 import run_all
    monkeypatch.setattr(run_all, "timing_path", lambda: tmp_path / "run_all_time.json")
    results = [SimpleNamespace(step=SimpleNamespace(name=spec.name), seconds=1.0) for spec in run_all.SPECS]
    run_all.write_timing(results, None, run_all.machine())
    timing = json.loads((tmp_path / "run_all_time.json").read_text())
    assert timing["cpu"] and timing["cores"] >= 1
    assert all(isinstance(timing[k], float) and timing[k] >= 0 for k in ("load_before", "load_after"))
    committed = json.loads((ROOT / "examples" / "resnet18" / "docs" / "run_all_time.json").read_text())
    assert all(isinstance(committed[k], float) for k in ("load_before", "load_after"))
    said = [f"{committed['total_seconds']:.0f} s", committed["cpu"], "docs/run_all_time.json"]
    for name in ("README.md", "README_cn.md"):  # the figure names its machine, and the file that holds its load
        text = " ".join((ROOT / "examples" / "resnet18" / name).read_text(encoding="utf-8").split())
        assert all(figure in text for figure in said), (name, said)
        assert f"{committed['load_before']:.2f}" not in text, f"{name}: a machine's load belongs with its figures"
