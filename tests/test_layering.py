"""The library's house, drawn from its own `import` lines (ast: nothing imported, lazy imports inside functions
counted too): the subpackages by layer, lowest first, each importing only those below it; no import circle among
its modules; no module over 600 lines. What holds today is named below as known, to be emptied one by one (the
plan: issue 66); anything new fails. Tools never import tests, and nothing outside tests edits sys.path or waives
E402 (tools is installed with the project: a tool runs as `python -m tools.x` or by its path, from anywhere)."""
import ast
import importlib
import re
import sys
import warnings

import pytest

from bert_sst2 import paths
from portcheck._moved import MOVED

LIB = paths.ROOT / "lib"
# lowest first; "" is the package's own modules (__init__, cli, __main__, _moved), above every subpackage
ORDER = ("core", "mapping", "forward", "parallel", "checkpoints", "generation", "gradients", "pipeline", "scripts", "")
MAX_LINES = 600

# known today, to be emptied after the round's merge (each a set of modules importing each other around a loop)
KNOWN_CIRCLES = []
KNOWN_UPWARD = []
KNOWN_OVERSIZE = {}  # lines today: a known module may not grow past them


def library(root=LIB, package="portcheck") -> dict:
    """{module: path} for every module of lib/portcheck (inject/'s sitecustomize as one of scripts/), or of another
    package under root (the project's tools)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported(tree, modules, package="portcheck") -> set:
    """The package's modules a module imports: `from portcheck.core import record` is portcheck.core.record (and
    `from portcheck import compare` the old path portcheck.compare), a name taken from a package (`from portcheck
    import convert`) the package itself."""
    found, modules = set(), set(modules) | set(MOVED)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == package)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
            found.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                         for a in node.names)
    return found


def graph(modules, package="portcheck") -> dict:
    return {m: imported(ast.parse(p.read_text(encoding="utf-8")), modules, package) for m, p in modules.items()}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ORDER) else ""


def circles(arrows: dict) -> list:
    """Each set of modules that import each other around a loop (a strongly connected component of two or more,
    Tarjan's), sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(arrows.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(tuple(sorted(part)))

    for v in sorted(arrows):
        if v not in index:
            visit(v)
    return sorted(found)


def upward(arrows: dict) -> list:
    """(importer, imported) of every arrow from a lower layer to a higher one."""
    return sorted((a, b) for a, targets in arrows.items() for b in targets
                  if ORDER.index(layer(a)) < ORDER.index(layer(b)))


def oversize(modules, known=KNOWN_OVERSIZE) -> list:
    """A line per module over MAX_LINES that is not known or grew past its known count, and per known module no
    longer over (off the list)."""
    lines = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in modules.items()}
    said = [f"{m}: {n} lines, over {MAX_LINES}" for m, n in lines.items() if n > MAX_LINES and m not in known]
    said += [f"{m}: {lines[m]} lines, grown past its known {n}" for m, n in known.items() if lines.get(m, 0) > n]
    said += [f"{m}: {lines.get(m, 0)} lines now: take it off KNOWN_OVERSIZE" for m in known
             if lines.get(m, 0) <= MAX_LINES]
    return said


@pytest.fixture(scope="module")
def arrows():
    return graph(library())


def test_every_import_of_the_library_is_a_module_of_its_own(arrows):
    """An old flat path (portcheck.compare) inside the library would import through portcheck._moved's alias."""
    modules = library()
    assert [(a, b) for a, targets in arrows.items() for b in sorted(targets) if b not in modules] == []


def test_no_import_circle_but_the_known(arrows):
    assert circles(arrows) == KNOWN_CIRCLES, "a circle opened: take it off KNOWN_CIRCLES; a new one: break it"


def test_no_lower_layer_imports_a_higher_one_but_the_known(arrows):
    assert upward(arrows) == KNOWN_UPWARD, f"layers, lowest first: {ORDER}"


def test_no_module_over_600_lines_but_the_known():
    assert oversize(library()) == []


# the floor's only import beyond numpy: a report's frame() asks for pandas when called (issue 64's notebook tables)
CORE_LAZY = {("portcheck.core.report", "pandas")}


def foreign(modules, lazy=CORE_LAZY) -> list:
    """(module, package) for every import of core's modules, lazy ones inside functions too, of a package that is
    neither the standard library, numpy nor core itself: the floor runs where no framework is installed."""
    out = []
    for m, path in modules.items():
        if layer(m) != "core":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            out += [(m, n) for n in names if n.split(".")[0] not in sys.stdlib_module_names | {"numpy"}
                    and not n.startswith("portcheck.core") and (m, n) not in lazy]
    return sorted(out)


def test_core_imports_no_framework():
    assert foreign(library()) == []


def test_the_core_check_sees_a_framework_imported_inside_a_function(tmp_path):
    planted = tmp_path / "portcheck" / "core" / "record.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("import numpy\nfrom portcheck.core import errors\n\ndef f(m):\n    import paddle\n")
    assert foreign({"portcheck.core.record": planted}) == [("portcheck.core.record", "paddle")]


def test_the_checks_see_a_planted_circle_an_upward_import_and_a_grown_module(tmp_path):
    planted = {"portcheck.core.a": {"portcheck.core.b"}, "portcheck.core.b": {"portcheck.core.a"},
               "portcheck.forward.c": {"portcheck.core.a", "portcheck.scripts.d"}, "portcheck.scripts.d": set(),
               "portcheck.core.e": {"portcheck.pipeline.f"}, "portcheck.pipeline.f": set(), "portcheck.cli": set(),
               "portcheck.mapping.g": {"portcheck.cli"}}
    assert circles(planted) == [("portcheck.core.a", "portcheck.core.b")]
    assert upward(planted) == [("portcheck.core.e", "portcheck.pipeline.f"),
                               ("portcheck.forward.c", "portcheck.scripts.d"),
                               ("portcheck.mapping.g", "portcheck.cli")]
    (tmp_path / "portcheck" / "core").mkdir(parents=True)
    (tmp_path / "portcheck" / "core" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "portcheck" / "core" / "known.py").write_text("x = 1\n" * 700)
    (tmp_path / "portcheck" / "core" / "split.py").write_text("x = 1\n")
    said = oversize(library(tmp_path), {"portcheck.core.known": 650, "portcheck.core.split": 900})
    assert said == [f"portcheck.core.big: {MAX_LINES + 1} lines, over {MAX_LINES}",
                    "portcheck.core.known: 700 lines, grown past its known 650",
                    "portcheck.core.split: 1 lines now: take it off KNOWN_OVERSIZE"]
    (tmp_path / "portcheck" / "core" / "a.py").write_text("from portcheck.forward import c\n"
                                                          "def f():\n    from portcheck import compare\n")
    (tmp_path / "portcheck" / "forward").mkdir()
    (tmp_path / "portcheck" / "forward" / "c.py").write_text("import portcheck.core.a\n")
    found = graph(library(tmp_path))
    assert found["portcheck.core.a"] == {"portcheck.forward.c", "portcheck.compare"}  # lazy imports count
    assert circles(found) == [("portcheck.core.a", "portcheck.forward.c")]


def test_an_old_module_path_is_the_new_module_and_says_where_it_went():
    from portcheck.forward import compare
    assert MOVED["portcheck.compare"] == "portcheck.forward.compare"
    modules = library()
    assert not [old for old in MOVED if old in modules], "a file at an old path: rename detection breaks"
    assert [new for new in MOVED.values() if new not in modules] == []
    held = sys.modules.pop("portcheck.compare", None)
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            old = importlib.import_module("portcheck.compare")
    finally:
        sys.modules.pop("portcheck.compare", None)
        if held is not None:
            sys.modules["portcheck.compare"] = held
    assert old is compare and old.__spec__.name == "portcheck.forward.compare"
    assert [str(w.message).split(":")[0] for w in said if w.category is DeprecationWarning] == \
        ["portcheck.compare moved to portcheck.forward.compare"]


def test_an_old_path_inside_a_subpackage_is_the_new_module_its_parent_holds_and_says_where_it_went():
    """portcheck.forward.stream, held by forward before checkpoints was a subpackage: imported either way (a dotted
    import, a name taken from the package), it is portcheck.checkpoints.stream, named so, and the old parent
    package's attribute."""
    import portcheck.forward
    from portcheck.checkpoints import stream
    from portcheck.parallel import split_rank
    assert MOVED["portcheck.forward.stream"] == "portcheck.checkpoints.stream"
    assert MOVED["portcheck.stream"] == "portcheck.checkpoints.stream"  # the flat path of before, not two hops
    olds = ("portcheck.forward.stream", "portcheck.forward.split_rank")
    held = {old: sys.modules.pop(old, None) for old in olds}
    for old in olds:
        portcheck.forward.__dict__.pop(old.rsplit(".", 1)[1], None)
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            old = importlib.import_module("portcheck.forward.stream")
            taken = importlib.import_module("portcheck.forward").__dict__.get("stream")
            exec("from portcheck.forward import split_rank as old_rank", scope := {})
    finally:
        for name, module in held.items():
            sys.modules.pop(name, None)
            portcheck.forward.__dict__.pop(name.rsplit(".", 1)[1], None)
            if module is not None:
                sys.modules[name] = module
    assert old is stream and taken is stream and old.__spec__.name == old.__name__ == "portcheck.checkpoints.stream"
    assert scope["old_rank"] is split_rank and split_rank.__spec__.name == "portcheck.parallel.split_rank"
    assert [str(w.message).split(":")[0] for w in said if w.category is DeprecationWarning] == \
        ["portcheck.forward.stream moved to portcheck.checkpoints.stream",
         "portcheck.forward.split_rank moved to portcheck.parallel.split_rank"]



def alternatives(names) -> str:
    return "|".join(sorted(names, key=len, reverse=True))


# the flat old paths (portcheck.compare), and per subpackage the modules it held (portcheck.forward.stream)
OLD = alternatives(old.split(".")[1] for old in MOVED if old.count(".") == 1 and old != "portcheck.convert")
HELD = {package: alternatives(old.split(".")[2] for old in MOVED if old.split(".")[1] == package)
        for package in {old.split(".")[1] for old in MOVED if old.count(".") == 2}}
OLD_IMPORT = re.compile("|".join(
    [rf"^[ \t]*(?:import|from) portcheck\.(?:{OLD}|convert)\b",
     rf"^[ \t]*from portcheck import (?:[\w ,]*?|\([\w ,\n]*?)\b(?:{OLD})\b"]
    + [rf"^[ \t]*(?:import|from) portcheck\.{package}\.(?:{held})\b" for package, held in sorted(HELD.items())]
    + [rf"^[ \t]*from portcheck\.{package} import (?:[\w ,]*?|\([\w ,\n]*?)\b(?:{held})\b"
       for package, held in sorted(HELD.items())]), re.M)


def old_paths(text: str) -> list:
    """The lines of a file importing a module by a path of before: flat (portcheck.compare; `from portcheck import
    convert` is the function) or in the subpackage that held it (portcheck.forward.stream)."""
    return [m.group(0).strip().split("\n")[0] for m in OLD_IMPORT.finditer(text)]


def test_the_project_imports_no_old_path():
    """The old paths are for users, for one version: a script of ours on one would print its DeprecationWarning
    (a one-line error test reads stderr); a branch merged after the move lands here first."""
    folders = [d for d in sorted(paths.ROOT.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    files = sorted(paths.ROOT.glob("*.py")) + [p for d in folders for p in sorted(d.rglob("*.py"))]
    said = {str(p.relative_to(paths.ROOT)): r for p in files if p.name != "test_layering.py"
            and (r := old_paths(p.read_text(encoding="utf-8")))}
    assert said == {}
    assert old_paths("import portcheck.runtime  # first\nfrom portcheck import convert, handin\n"
                     "    from portcheck.compare import F64\nfrom portcheck import convert, resolve\n"
                     "from portcheck.core import record\nfrom portcheck import (Fused,\n    stream)\n"
                     "from portcheck import compare_forward\nreport = 1\n") == \
        ["import portcheck.runtime", "from portcheck import convert, handin", "from portcheck.compare",
         "from portcheck import (Fused,"]
    assert old_paths("from portcheck.forward import compare, stream\nimport portcheck.forward.split_rank as r\n"
                     "from portcheck.forward.standins import install\nfrom portcheck.forward import (twin,\n  fleet)\n"
                     "from portcheck.forward import compare  # stream\nfrom portcheck.forward.twin import F64\n"
                     "from portcheck.checkpoints import stream\n"
                     "from portcheck.parallel.split import compare_split\n") == \
        ["from portcheck.forward import compare, stream", "import portcheck.forward.split_rank",
         "from portcheck.forward.standins", "from portcheck.forward import (twin,"]


SYS_PATH = re.compile(r"\bsys\.path\s*(\.\s*(insert|append|extend|remove)\b|\[[^]]*\]\s*=|[+]?=)")
TESTS_IMPORTED = re.compile(r"^\s*(from\s+tests\b|import\s+tests\b|(from|import)\s+(test_\w+|conftest)\b)", re.M)


def reaches(text: str) -> list:
    """What a file outside tests must not do: edit sys.path, import tests, waive E402."""
    return ([m.group(0) for m in SYS_PATH.finditer(text)] + [m.group(0).strip() for m in TESTS_IMPORTED.finditer(text)]
            + (["noqa: E402"] if "E402" in text else []))


def test_nothing_outside_tests_edits_sys_path_imports_tests_or_waives_e402():
    folders = [d for d in sorted(paths.ROOT.iterdir()) if d.is_dir() and d.name not in ("tests", "build")
               and not d.name.startswith(".")]  # .venv, .git
    outside = sorted(paths.ROOT.glob("*.py")) + [p for d in folders for p in sorted(d.rglob("*.py"))]
    said = {str(p.relative_to(paths.ROOT)): r for p in outside if (r := reaches(p.read_text(encoding="utf-8")))}
    assert said == {}
    planted = ("import sys\nsys.path.insert(0, 'tests')\nimport test_steps25 as t  # noqa: E402\n"
               "sys.path[0] = '.'\nfrom tests.plant import x\n")
    assert reaches(planted) == ["sys.path.insert", "sys.path[0] =", "import test_steps25", "from tests",
                                "noqa: E402"]


# ---------------------------------------------------------------- the tools: the benchmarks and the zoo

def tools(root=paths.ROOT) -> dict:
    """{module: path} for every module of tools/ (the zoo's and its checks' too)."""
    return library(root, "tools")


def reached(arrows: dict, start: str) -> set:
    """Every module `start` imports, through the modules it imports too."""
    seen, todo = set(), [start]
    while todo:
        for m in arrows.get(todo.pop(), ()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def test_the_tools_import_in_no_circle_and_none_is_over_600_lines():
    """Drawn as the library's house is: tools.zoo's page reads the families' rows and the runs recorded, and neither
    the families nor a command that records a run imports the page (their commands write it by its own)."""
    arrows = graph(tools(), "tools")
    assert {"tools.zoo.page", "tools.zoo.families", "tools.zoo.checks", "tools.bench_doc"} <= set(arrows)
    assert circles(arrows) == []
    assert oversize(tools(), {}) == []
    assert "tools.zoo.families" in arrows["tools.zoo.page"]
    assert not {m for m in arrows if m.startswith("tools.zoo.") and "tools.zoo.page" in reached(arrows, m)} - \
        {"tools.zoo.run"}  # the cases' command, which writes the pages with --page


def test_the_tools_check_sees_a_circle_through_a_lazy_import_and_a_grown_tool(tmp_path):
    zoo = tmp_path / "tools" / "zoo"
    (zoo / "checks").mkdir(parents=True)
    (tmp_path / "tools" / "bench_doc.py").write_text("import json\n")
    (zoo / "page.py").write_text("from tools import bench_doc\nfrom tools.zoo import families\n")
    (zoo / "families.py").write_text("def write():\n    from tools.zoo import page\n    page.write()\n")
    (zoo / "checks" / "__init__.py").write_text("from tools.zoo.checks import models\n")
    (zoo / "checks" / "models.py").write_text("from tools.zoo.checks.judging import used\n" + "x = 1\n" * MAX_LINES)
    (zoo / "checks" / "judging.py").write_text("def used(rows):\n    return 0.0\n")
    arrows = graph(tools(tmp_path), "tools")
    assert arrows["tools.zoo.checks.models"] == {"tools.zoo.checks.judging"}  # a module's package is no arrow
    assert circles(arrows) == [("tools.zoo.families", "tools.zoo.page")]
    assert oversize(tools(tmp_path), {}) == [f"tools.zoo.checks.models: {MAX_LINES + 1} lines, over {MAX_LINES}"]
    (zoo / "checks" / "judging.py").write_text("from tools.zoo.checks import CHECKS\n")  # a module its package imports
    assert ("tools.zoo.checks", "tools.zoo.checks.judging", "tools.zoo.checks.models") in \
        circles(graph(tools(tmp_path), "tools"))
