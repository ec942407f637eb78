"""Every name a script or tool takes from this project's packages exists: a moved constant
(tools/bench_speed.py once read a data constant after it had moved to hparams)
fails here, not in the middle of a benchmark no test runs."""
import ast
import importlib
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from bert_sst2 import paths

PACKAGES = ("models", "bert_sst2", "portcheck", "examples")
SCRIPTS = sorted(p for folder in ("pipeline", "tools", "weights", "classifier_weights", "fake_data", "examples")
                 for p in (paths.ROOT / folder).rglob("*.py"))


def project_names(tree):
    """{local name: module path} for `from <package> import <module>` and `from <package>.<module> import <name>`."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
            for alias in node.names:
                names[alias.asname or alias.name] = (node.module, alias.name)
    return names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(paths.ROOT)))
def test_names_taken_from_the_project_exist(script):
    tree = ast.parse(script.read_text())
    names = project_names(tree)
    missing = []
    for local, (module, name) in names.items():
        if not hasattr(importlib.import_module(module), name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"{module}.{name}")
    for node in ast.walk(tree):  # module.attr where module came from `from <package> import <module>`
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
            module, name = names[node.value.id]
            try:
                target = importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                continue  # a class or function, not a module
            if not hasattr(target, node.attr):
                missing.append(f"{module}.{name}.{node.attr} (line {node.lineno})")
    assert not missing, missing


def imported_modules(scripts) -> list:
    """Every module the scripts import, anywhere in the file (Step 5 imports its framework inside main);
    `from <package> import <name>` adds <package>.<name> when that is a module."""
    found = set()
    for script in scripts:
        for node in ast.walk(ast.parse(script.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names
                             if node.module in PACKAGES and importlib.util.find_spec(f"{node.module}.{alias.name}"))
    return sorted(found)


@pytest.mark.parametrize("side, other", [("pt", "paddle"), ("pd", "torch")])
def test_a_frameworks_scripts_never_load_the_other(side, other):
    """A PyTorch result comes from a process without Paddle, and the reverse: importing everything the
    pt_*.py scripts import loads no Paddle (reprod_log would: its utils import paddle), and the same
    for pd_*.py and torch."""
    modules = imported_modules(sorted((paths.ROOT / "pipeline").rglob(f"{side}_*.py")))
    assert loaded(modules, [other]) == [], f"{side}_*.py scripts load {other}"


def loaded(modules, frameworks, helped=()) -> list:
    """Those of `frameworks` that importing `modules`, then running each script of `helped` with --help, loads in
    a fresh process."""
    helped = [str(p) for p in helped]
    probe = ("import contextlib, importlib, io, json, runpy, sys\n"
             f"for m in {modules!r}:\n    importlib.import_module(m)\n"
             f"for s in {helped!r}:\n    sys.argv = [s, '--help']\n"
             "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
             "        runpy.run_path(s, run_name='__main__')\n"
             f"print(json.dumps([f for f in {frameworks!r} if f in sys.modules]))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd="/tmp",
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_checks_load_no_framework():
    """The checks conftest.run runs in the test process (IN_PROCESS) import neither framework, as a reviewer's
    machine without them runs them."""
    from conftest import IN_PROCESS
    checks = [p for p in SCRIPTS if IN_PROCESS.fullmatch(str(p.relative_to(paths.ROOT)))]
    assert len(checks) == 7, checks  # Steps 1 to 5, check_log_reprod, check_pair
    modules = imported_modules(checks)
    assert "matplotlib.pyplot" in modules  # check_step5's plot, imported inside a function: found all the same
    assert loaded(modules, ["torch", "paddle"]) == []
    # the probe sees a framework loaded: by an import, and by a script's --help (pt_forward_bert imports torch first)
    assert loaded(modules + ["models.pd_bert"], ["torch", "paddle"],
                  helped=[paths.ROOT / "pipeline/Step1/pt_forward_bert.py"]) == ["torch", "paddle"]


def test_step2_scripts_answer_help_without_their_frameworks():
    """Step 2's four scripts import their framework and data library (transformers, paddlenlp: seconds each) once
    their flags are good: --help loads none of them (tests/test_edges.py's probe runs every script's --help)."""
    scripts = sorted((paths.ROOT / "pipeline" / "Step2").glob("p[td]_*.py"))
    assert len(scripts) == 4, scripts
    assert loaded([], ["torch", "paddle", "transformers", "paddlenlp"], helped=scripts) == []
