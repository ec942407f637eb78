"""Importing or using portcheck changes no process setting that changes what a user's model computes.

A Paddle flag holds for the whole process: Paddle 3.3.1 under FLAGS_use_stride_kernel=0 returns a tensor unchanged
from `Tensor.view([-1, 64])`, and a model that views (Qwen3-MoE's experts) computes something else or stops. Each run
here is a fresh interpreter: a flag given as an environment variable is read when Paddle loads, so the entry
scripts' order (`import portcheck.core.runtime` first, then the frameworks) and a child started after an import
are both run as they run.
"""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("paddle")

# A model's forward on strided tensors: `view` of contiguous ones, `reshape` of transposed and sliced ones, each
# output's shape and values printed as one json line.
MODEL = """
import json
import numpy as np
import paddle

def forward():
    x = paddle.to_tensor(np.random.RandomState(0).randn(2, 3, 128).astype("float32"))
    w = paddle.to_tensor(np.random.RandomState(1).randn(64, 64).astype("float32"))
    out = {}
    def keep(name, make):
        try:
            out[name] = (make(), None)
        except Exception as e:  # noqa: BLE001 (what a setting breaks is the finding)
            out[name] = (None, type(e).__name__)
        return out[name][0]
    h = keep("view", lambda: x.view([-1, 64]))
    y = keep("matmul", lambda: paddle.matmul(h, w))
    t = keep("transposed", lambda: y.reshape([2, 6, 64]).transpose([0, 2, 1]))
    keep("reshape of transposed", lambda: t.reshape([2, -1]) * 2)
    s = keep("sliced", lambda: x[:, 1:, 32:])
    keep("reshape of sliced", lambda: s.reshape([-1, 48]) + 1)
    keep("view of its copy", lambda: t.contiguous().view([-1, 12]))
    return {k: (None, e) if v is None else (list(v.shape), v.numpy().round(6).tolist()) for k, (v, e) in out.items()}

print(json.dumps(forward()))
"""


def run(code: str, env=None) -> list:
    """The json lines a fresh interpreter prints running code, with no FLAGS_* of this process's handed down."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("FLAGS_")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd="/tmp",
                          env={**base, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith(("{", "["))]


@pytest.fixture(scope="module")
def alone():
    """The model's outputs with no portcheck in the process."""
    (outputs,) = run(MODEL)
    assert outputs["view"][0] == [12, 64] and outputs["reshape of transposed"][0] == [2, 384], outputs
    return outputs


def test_the_probe_sees_a_setting_that_changes_the_model(alone):
    """The probe fails a process setting that changes it: under FLAGS_use_stride_kernel=0 `view` returns its input
    unchanged and the matmul after it raises."""
    (outputs,) = run(MODEL, env={"FLAGS_use_stride_kernel": "0"})
    assert outputs["view"][0] == [2, 3, 128] and outputs["matmul"][1] is not None
    assert outputs != alone


def test_an_entry_scripts_imports_before_the_frameworks_change_nothing(alone):
    """`import portcheck.core.runtime` first, as every entry script and tool does (with the package and the
    command's module), then Paddle: the same outputs and shapes."""
    assert run(f"import portcheck.core.runtime, portcheck, portcheck.cli\n{MODEL}") == [alone]


# After the model's first run: portcheck imported as a script and the command do, used on a pair, the model run
# again; the FLAGS_* the process set itself and would hand to `portcheck run`'s scripts; a child's run of the model.
USED = """
before = dict(os.environ)
import portcheck, portcheck.core.runtime, portcheck.cli
from portcheck.scripts import launch
import torch
torch.manual_seed(0)
pt = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
pd = paddle.nn.Sequential(paddle.nn.Linear(8, 4), paddle.nn.ReLU())
x = np.random.RandomState(2).randn(3, 8).astype("float32")
pd.set_state_dict(portcheck.convert(pt, pd, inputs=x))
assert portcheck.compare_forward(pt.eval(), pd.eval(), x).passed
print(json.dumps(forward()))
added = {k: v for k, v in os.environ.items() if k.startswith("FLAGS_") and before.get(k) != v}
handed = {k: v for k, v in launch.environment({}).items() if k.startswith("FLAGS_") and before.get(k) != v}
print(json.dumps([added, handed]))
child = subprocess.run([sys.executable, "-c", MODEL], capture_output=True, text=True, cwd="/tmp")
print(child.stdout.strip().splitlines()[-1])
"""


def test_importing_and_using_portcheck_after_the_model_changes_nothing(alone):
    """In one process: the model, then portcheck imported and used on a pair (convert, compare_forward), then the
    model again; and a child process started after all that, with the environment it hands down."""
    code = f"import os, subprocess, sys\nMODEL = {MODEL!r}\n{MODEL}\n{USED}"
    before, again, settings, child = run(code)
    assert before == alone and again == alone, "the model's outputs changed once portcheck was imported and used"
    assert settings == [{}, {}], f"a Paddle flag set for the process or handed to a child: {settings}"
    assert child == alone
