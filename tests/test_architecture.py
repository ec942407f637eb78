"""docs/architecture.md held to the code: its picture's arrows are the arrows between subpackages the library's
imports give (tests/test_layering.py's graph, module to module, collapsed to floors), no more and no fewer, every
one going down; every module and name its "where to change" table names is there, and the Chinese twin's table
names the same. Read with ast: nothing of the library is run."""
import ast
import functools
import re

import pytest

from bert_sst2 import paths
from test_layering import KNOWN_UPWARD, LIB, ORDER, graph, layer, library

PAGE, PAGE_CN = paths.ROOT / "docs" / "architecture.md", paths.ROOT / "docs" / "architecture_cn.md"
TOP = "cli"  # the picture's name for ORDER's "": the package's own modules (__init__, cli, __main__, _moved)
FENCE = re.compile(r"^```text\n(.*?)^```", re.M | re.S)
FLOOR = re.compile(r"^│ (\w+) +│(?:──▶ ([\w ]+))?")
# issue 66's plan (its step, the module it makes): named by the table, not yet in this tree; each is taken off as
# its step lands (the test says which)
NOT_YET = {}


def floor(layer_name: str) -> str:
    return layer_name or TOP


def height(name: str) -> int:
    return ORDER.index("" if name == TOP else name)


def drawn(text: str) -> tuple:
    """(the floors, top first; {(floor, floor it imports)}) of the page's picture: its ```text block with arrows."""
    picture = next(b for b in FENCE.findall(text) if "──▶" in b)
    floors, arrows = [], set()
    for line in picture.splitlines():
        m = FLOOR.match(line)
        if m:
            floors.append(m.group(1))
            arrows |= {(m.group(1), b) for b in (m.group(2) or "").split()}
    return floors, arrows


def imported(arrows: dict, excused=()) -> dict:
    """{(floor, floor it imports): [(module, module) giving it]} of a module graph, less the arrows excused."""
    out = {}
    for a, targets in arrows.items():
        for b in sorted(targets):
            if layer(a) != layer(b) and (a, b) not in excused:
                out.setdefault((floor(layer(a)), floor(layer(b))), []).append((a, b))
    return out


def differences(picture: set, imports: dict) -> list:
    return ([f"drawn, not imported: {a} -> {b}" for a, b in sorted(picture - set(imports))]
            + [f"imported, not drawn: {a} -> {b} ({', '.join(f'{m} imports {n}' for m, n in imports[a, b])})"
               for a, b in sorted(set(imports) - picture)])


@pytest.fixture(scope="module")
def imports():
    return imported(graph(library()), set(KNOWN_UPWARD))


def test_the_picture_is_the_floors_imports(imports):
    """Every arrow between floors the imports give, and no other; the upward arrows tests/test_layering.py still
    names as known (issue 66's plan removes them) are not drawn: the picture is the house without them."""
    floors, picture = drawn(PAGE.read_text(encoding="utf-8"))
    assert floors == [floor(f) for f in reversed(ORDER)]
    assert [(a, b) for a, b in sorted(picture) if height(a) <= height(b)] == []
    assert differences(picture, imports) == []


def test_the_picture_check_sees_an_arrow_missing_and_one_too_many(imports):
    text = PAGE.read_text(encoding="utf-8")
    _, picture = drawn(text)
    planted = {"portcheck.core.a": {"portcheck.mapping.b"}, "portcheck.mapping.b": set(),
               "portcheck.pipeline.c": {"portcheck.mapping.b"}, "portcheck.cli": {"portcheck.pipeline.c"}}
    said = differences(picture, imported(planted))
    assert "imported, not drawn: core -> mapping (portcheck.core.a imports portcheck.mapping.b)" in said
    assert "drawn, not imported: scripts -> core" in said
    _, fewer = drawn(text.replace("│ forward     │──▶ mapping core", "│ forward     │──▶ core"))
    assert [line.split(" (")[0] for line in differences(fewer, imports)] == \
        ["imported, not drawn: forward -> mapping"]
    assert imported({"portcheck.core.diff": {"portcheck.mapping.pairing"}},
                    {("portcheck.core.diff", "portcheck.mapping.pairing")}) == {}


QUALIFIED = re.compile(r"`((?:portcheck|tools)(?:\.\w+)+)")


def named(text: str) -> set:
    """The qualified names (`portcheck.core.tolerances.GUIDE`, `tools.zoo.cases`) of a page's last section: the
    table of where to change what."""
    return set(QUALIFIED.findall(text.split("\n## ")[-1]))


@functools.lru_cache(maxsize=None)
def parsed(path) -> list:
    return ast.parse(path.read_text(encoding="utf-8")).body


def defines(path, names: list) -> bool:
    """Whether a module file defines names[0] at its top level (and names[1] inside it, a class's method...)."""
    body = parsed(path)
    for name in names:
        found = [n for n in body if getattr(n, "name", None) == name or any(
            getattr(t, "id", None) == name for t in getattr(n, "targets", [getattr(n, "target", None)]))]
        if not found:
            return False
        body = getattr(found[0], "body", [])
    return True


def missing(qualified: str) -> bool:
    """A name whose module is no file of lib/portcheck or tools, or which that module does not define."""
    parts = qualified.split(".")
    base = LIB if parts[0] == "portcheck" else paths.ROOT
    for i in range(len(parts), 0, -1):
        for path in (base.joinpath(*parts[:i]).with_suffix(".py"), base.joinpath(*parts[:i], "__init__.py")):
            if path.is_file():
                return not defines(path, parts[i:])
    return True


def test_every_name_the_table_gives_is_in_the_code_and_the_twin_gives_the_same():
    names = named(PAGE.read_text(encoding="utf-8"))
    assert len(names) >= 20 and named(PAGE_CN.read_text(encoding="utf-8")) == names
    gone = {n for n in names if missing(n)}
    assert sorted(gone - set(NOT_YET)) == [], "named by docs/architecture.md, not in the code"
    assert sorted(set(NOT_YET) - gone) == [], "there now: take it off NOT_YET"


def test_the_name_check_sees_a_name_not_there():
    assert not missing("portcheck.core.tolerances.GUIDE") and not missing("tools.zoo.checks.CHECKS")
    assert not missing("portcheck.scripts.hooks_torch.TorchSide.module_config") and not missing("portcheck.cli")
    assert missing("portcheck.core.tolerances.GUIDES") and missing("portcheck.core.nowhere.GUIDE")
    assert missing("portcheck.scripts.hooks_torch.TorchSide.module_settings")


WALKED = re.compile(r"`((?:portcheck\.)?(?:core|mapping|forward|parallel|checkpoints|generation|gradients|pipeline|"
                    r"scripts|cli)(?:\.\w+)*)`")


def walked(text: str, heading: str) -> set:
    """Every module and name the walks through the house name (`checkpoints.split_folders`, a floor's short form, is
    portcheck's), the section under its heading."""
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return {n if n.startswith("portcheck") else f"portcheck.{n}" for n in WALKED.findall(section)}


def test_the_walks_through_the_house_name_what_the_code_holds_and_the_twin_walks_the_same():
    names = walked(PAGE.read_text(encoding="utf-8"), "## Two walks through the house")
    assert len(names) >= 15 and walked(PAGE_CN.read_text(encoding="utf-8"), "## 在结构里走两遍") == names
    assert sorted(n for n in names if missing(n)) == [], "walked by docs/architecture.md, not in the code"
    assert missing("portcheck.parallel.split.compare_splits_of")  # a step renamed in the code is red here


PARAGRAPH = re.compile(r"^\*\*(\w+)\*\* ?[(（].*?(?=^\*\*\w+\*\* ?[(（]|^#|\Z)", re.M | re.S)
NAMED = re.compile(r"`(\w+)/?`(?:\s*(?:and|和)\s*`(\w+)`)?\s*[(（]")  # a module named as the paragraphs name one: `x` (what it is)


def floors_named(text: str) -> dict:
    """{floor: the modules its paragraph names, each as `module` (what it holds)} of a page."""
    out = {}
    for m in PARAGRAPH.finditer(text):
        out[m.group(1)] = {n for pair in NAMED.findall(m.group(0)) for n in pair if n}
    return out


def floors_held(modules) -> dict:
    """{floor: its modules' last names} of the library (a folder inside a floor, inject/, by its own name)."""
    out = {}
    for name in modules:
        parts = name.split(".")
        if len(parts) > 2 and parts[1] in ORDER:
            out.setdefault(parts[1], set()).add(parts[2])
    return out


@pytest.mark.parametrize("page", [PAGE, PAGE_CN], ids=lambda p: p.name)
def test_each_floors_paragraph_names_its_modules_and_no_other(page):
    """A newcomer looked for forward/report.py and pipeline/kinks_files.py, which the page named and the code does
    not hold: each paragraph names exactly its floor's modules."""
    named = floors_named(page.read_text(encoding="utf-8"))
    assert {floor: names for floor, names in named.items() if floor != TOP} == floors_held(library())


def test_the_paragraph_check_sees_a_module_renamed_and_one_left_out():
    held = floors_held(library())
    text = PAGE.read_text(encoding="utf-8").replace("`kink_files` (", "`kinks_files` (").replace("`result` (`ForwardReport`)", "(`ForwardReport`)")
    named = floors_named(text)
    assert named["pipeline"] ^ held["pipeline"] == {"kinks_files", "kink_files"}
    assert held["forward"] - named["forward"] == {"result"}


def unnamed(docstring: str, modules) -> list:
    """The modules a subpackage's docstring does not name, each as a word (`settle (...)`, `(record, same_run)`)."""
    return sorted(m for m in modules if not re.search(rf"\b{m}\b", docstring))


def test_each_subpackages_docstring_names_its_modules():
    """A newcomer reads lib/portcheck/<floor>/__init__.py for what the floor holds: mapping's named neither settle
    nor state, scripts' six of its thirteen modules."""
    said = {floor: unnamed(ast.get_docstring(ast.Module(parsed(LIB / "portcheck" / floor / "__init__.py"), [])) or "",
                           names) for floor, names in floors_held(library()).items()}
    assert {floor: names for floor, names in said.items() if names} == {}
    assert unnamed("names (a name map's forms), pairing, settled groups", {"names", "pairing", "settle"}) == ["settle"]
