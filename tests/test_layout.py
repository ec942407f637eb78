"""Every name a script or tool takes from this project's packages exists: a moved constant
(tools/bench_speed.py once read common.data.DO_LOWER_CASE after it had moved to common.hparams)
fails here, not in the middle of a benchmark no test runs."""
import ast
import importlib

import pytest

from common import paths

PACKAGES = ("models", "common", "checks", "twins")
SCRIPTS = sorted(p for folder in ("pipeline", "tools", "weights", "classifier_weights", "fake_data")
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
