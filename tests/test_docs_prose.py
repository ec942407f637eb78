"""The user pages read as guidance: no sentence tells the project's history (a commit, a round, a branch, the code
before, an issue number) or a machine's load, which live on the benchmark pages; English paragraphs under 80 words
and sentences under 40. The benchmark pages (docs/bench/) say the load their figures were taken at, and tell no
history either.

Each page is a guidance page or a reference page (GUIDANCE, REFERENCE); a guidance page opens in one order: what it
is for in a sentence or two, its shortest program and what that prints (held to its run by tests/test_docs_blocks.py),
what it prints with a bug planted (a run's printed block saying RED or False), then the details under `## ` headings.

Pages not yet rewritten so are listed (HISTORY_LEFT, LONG_LEFT, BENCH_HISTORY_LEFT) and held there strictly: a
listed page that passes fails this file until its name leaves the list, so the lists only shrink (PLANTED_LEFT
too)."""
import re

import pytest

from bert_sst2 import paths
from test_docs_blocks import BLOCK, PRINTED, language, runs

DOCS = paths.ROOT / "docs"
# figures and how they were taken: a machine's load and the date belong on the benchmark pages (docs/bench/)
TOLD = (r"(?<![\w.+-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w.])"   # a commit
        r"|\b(?:this|last|previous|next|earlier|that) (?:round|session|branch)\b|\bon this branch\b|\bon main\b"
        r"|\bthe code before\b|\bbefore (?:the|this) fix\b|\bissue \d+"
        r"|\b(?:the previous|an earlier|the earlier) reference run\b|\(\d+(?:\.\d+)? (?:min )?before\)|\bthe old way\b"
        r"|上一轮|这一轮|本轮|之前的代码|此前的代码|本分支|上一次参考运行|更早的一次参考运行|之前为 \d")
LOAD = r"\bload average\b|\bat load \d|\bload \d+(?:\.\d+)?\b|平均负载|负载均值|负载约?\s*\d"
HISTORY = re.compile(f"{TOLD}|{LOAD}", re.I)
# a benchmark page says the load its figures were taken at (tools/bench_doc.py's header), never the project's history
BENCH_HISTORY = re.compile(TOLD, re.I)
HISTORY_LEFT = set()
BENCH_HISTORY_LEFT = set()
LONG_LEFT = set()
# Each page of docs/ (with its _cn twin) is one of two kinds, and a new page is placed in one: a guidance page is
# followed (it opens with what it is for, its shortest program and what that prints, then the details); a reference
# page is looked up
GUIDANCE = {"index", "own_model", "run", "view", "pairing", "large_models", "zoo", "review", "examples", "bert",
            "generation", "paconvert"}
REFERENCE = {"messages", "api", "architecture", "causes", "guarantees", "tolerances", "rules"}
# guidance pages whose opening shows no planted run, and why none belongs there
NO_PLANTED = {
    "bert",       # the committed reference hand-in, checked: green; its bugs are under "When a check goes red"
    "examples",   # a list of the examples, each a script that prints its own planted run
}
# guidance pages whose opening does not show a planted run yet
PLANTED_LEFT = set()
# a printed block showing a red run: a verdict RED, or `report.passed` printed False at a line's start
SHOWS_RED = re.compile(r"\bRED\b|^False\b", re.M)


def user_pages():
    return sorted(DOCS.glob("*.md"))


def readmes():
    """The READMEs a user reads beside the docs: the repository's, each step's and each example's."""
    root = paths.ROOT
    return [root / "README.md", root / "README_cn.md", *sorted(root.glob("pipeline/*/README*.md")),
            *sorted(root.glob("examples/*/README*.md"))]


def prose(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def history(text: str, pattern=HISTORY) -> list:
    return [m.group(0) for m in pattern.finditer(prose(text))]


def paragraphs(text: str) -> list:
    """Each paragraph or list item of running text: headings, tables, pictures and code left out."""
    out, cur = [], []
    for line in prose(text).splitlines():
        if not line.strip() or line.startswith(("#", "|", "<!--", "![")):
            out, cur = out + ([" ".join(cur)] if cur else []), []
            continue
        if line.lstrip().startswith(("- ", "* ")) and cur:
            out, cur = out + [" ".join(cur)], []
        cur.append(line.strip())
    return out + ([" ".join(cur)] if cur else [])


def words(text: str) -> int:
    return len(re.sub(r"`[^`]*`", "X", text).split())  # a code span is one word


def too_long(text: str) -> list:
    said = []
    for p in paragraphs(text):
        if words(p) >= 80:
            said.append(f"a paragraph of {words(p)} words: {p[:60]}...")
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(`*\[])", re.sub(r"`[^`]*`", "X", p)):
            if words(s) >= 40:
                said.append(f"a sentence of {words(s)} words: {s[:60]}...")
    return said


@pytest.mark.parametrize("page", user_pages() + readmes(), ids=lambda p: str(p.relative_to(paths.ROOT)))
def test_no_user_page_tells_the_projects_history_or_a_machines_load(page):
    found = history(page.read_text(encoding="utf-8"))
    if page.stem in HISTORY_LEFT:
        assert found, f"{page.name} is clean now: take it out of HISTORY_LEFT"
        return
    assert not found, f"{page.name}: {found[:5]} (figures and how they were taken: a benchmark page)"


@pytest.mark.parametrize("page", sorted((DOCS / "bench").glob("*.md")), ids=lambda p: p.stem)
def test_no_benchmark_page_tells_the_projects_history(page):
    found = history(page.read_text(encoding="utf-8"), BENCH_HISTORY)
    if page.stem in BENCH_HISTORY_LEFT:
        assert found, f"bench/{page.name} is clean now: take it out of BENCH_HISTORY_LEFT"
        return
    assert not found, f"bench/{page.name}: {found[:5]} (the tool that writes it, or its JSON, tells it)"


@pytest.mark.parametrize("page", [p for p in user_pages() if not p.stem.endswith("_cn")], ids=lambda p: p.stem)
def test_english_paragraphs_under_80_words_and_sentences_under_40(page):
    found = too_long(page.read_text(encoding="utf-8"))
    if page.stem in LONG_LEFT:
        assert found, f"{page.name} reads short now: take it out of LONG_LEFT"
        return
    assert not found, f"{page.name}: {found[:3]}"


def test_the_checks_see_history_and_length():
    assert history("Measured on bf13fae at load 6, the code before was red.") == ["bf13fae", "at load 6", "the code before"]
    assert history("在本分支的代码上，负载 6-7") == ["本分支", "负载 6"]
    assert history("two correct ports round differently; a ReLU's branch; 1e-05 and 0x7f; 69744623 rows") == []
    assert history("```\ngit log bf13fae\n```\nplain") == []
    assert history("the previous reference run (34.7 before), the old way; 上一次参考运行") == [
        "the previous reference run", "(34.7 before)", "the old way", "上一次参考运行"]
    assert history("a kill left an earlier run's files; the previous run's records") == []
    assert history("1-min load 3.6 before, issue 34, a2439c9", BENCH_HISTORY) == ["issue 34", "a2439c9"]
    long = " ".join(["word"] * 45) + "."
    assert too_long(long) and not too_long("Short. " * 10)
    assert too_long("\n".join(["text " * 20] * 5)) and not too_long("- " + "a " * 30 + "\n- " + "b " * 30)


@pytest.mark.parametrize("page", user_pages(), ids=lambda p: p.stem)
def test_a_page_opens_with_its_language_switch_once(page):
    """The first line links the page's twin in the other language; a second switch below the title reads as a
    stray line."""
    twin = page.stem.removesuffix("_cn") if page.stem.endswith("_cn") else f"{page.stem}_cn"
    if not (DOCS / f"{twin}.md").is_file():
        return
    text = page.read_text(encoding="utf-8")
    assert f"({twin}.md)" in text.split("\n", 1)[0], f"{page.name}: its first line does not link {twin}.md"
    switches = [line for line in text.splitlines() if re.fullmatch(rf"(English \| )?\[(中文|English)\]\({twin}\.md\)"
                                                                    r"( \| 中文)?", line.strip())]
    assert len(switches) == 1, f"{page.name}: the language switch appears {len(switches)} times"


def test_every_page_is_guidance_or_reference_once():
    stems = {p.stem.removesuffix("_cn") for p in user_pages()}
    assert not GUIDANCE & REFERENCE, GUIDANCE & REFERENCE
    assert stems == GUIDANCE | REFERENCE, f"unplaced: {sorted(stems - GUIDANCE - REFERENCE)}, " \
                                           f"gone: {sorted(GUIDANCE | REFERENCE - stems)}"


def sentences(text: str) -> list:
    """The sentences of a paragraph, English or Chinese (a code span one word)."""
    text = re.sub(r"`[^`]*`", "X", text)
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(`*\[])|(?<=[。！？])", text) if s.strip()]


def opening(text: str) -> str:
    """A page's text after its language switch and title, up to its first `## ` heading (none: no opening)."""
    body = text.split("\n", 1)[1].lstrip("\n")
    body = body.split("\n", 1)[1] if body.startswith("# ") else body
    fenced = re.sub(r"```.*?```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), body, flags=re.S)
    heading = re.search(r"^## ", fenced, re.M)
    return body[:heading.start()] if heading else ""


def opens_as_guidance(text: str) -> list:
    """What a guidance page's opening lacks: a first paragraph of at most two sentences (what the page is for), then
    as its first code a block that runs (a program, commands, a test's), then the block of what it prints."""
    head = opening(text)
    if not head:
        return ["no `## ` heading: the details have no place after the opening"]
    said, first = [], (paragraphs(head) or [""])[0]
    if len(sentences(first)) > 2:
        said.append(f"a first paragraph of {len(sentences(first))} sentences: {first[:60]}...")
    found = [(m.start(), language(m.group("lang"), m.group("mark"))) for m in BLOCK.finditer(head)]
    blank = re.sub(r"```.*?```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), head, flags=re.S)
    indented = re.search(r"^ {4}(?:python3?|pip|mkdocs|cd|\.) ", blank, re.M)
    if not found:
        said.append("no code block before the first `## ` heading")
    elif indented and indented.start() < found[0][0]:
        said.append(f"its first code is an indented command no test runs: {indented.group(0).strip()!r}...")
    elif not runs(found[0][1]):
        said.append(f"its first block is not run (marked {found[0][1]!r})")
    elif len(found) < 2 or found[1][1] != PRINTED:
        said.append("its first block is not followed by what it prints (<!-- block: printed by the block above -->)")
    return said


def shows_planted(text: str) -> bool:
    """Whether a page's opening shows what a run prints with a bug planted: a printed block (held to its run by
    tests/test_docs_blocks.py) saying RED or False."""
    return any(language(m.group("lang"), m.group("mark")) == PRINTED and SHOWS_RED.search(m.group("code"))
               for m in BLOCK.finditer(opening(text)))


@pytest.mark.parametrize("page", [p for p in user_pages() if p.stem.removesuffix("_cn") in GUIDANCE],
                         ids=lambda p: p.stem)
def test_a_guidance_page_opens_with_what_it_is_for_its_program_and_what_that_prints(page):
    """One or two sentences of what the page is for; the shortest whole program (or commands) that does it, and what
    it prints: a printed block, which the suite holds to the block's run (tests/test_docs_blocks.py); then the
    details under `## ` headings."""
    found = opens_as_guidance(page.read_text(encoding="utf-8"))
    assert not found, f"{page.name}: {found}"


@pytest.mark.parametrize("page", [p for p in user_pages() if p.stem.removesuffix("_cn") in GUIDANCE - NO_PLANTED],
                         ids=lambda p: p.stem)
def test_a_guidance_page_opens_with_what_a_planted_bug_prints(page):
    """After the clean run, the same program with a realistic bug planted and what it prints, red: a green that
    could not have been red proves nothing."""
    shown = shows_planted(page.read_text(encoding="utf-8"))
    if page.stem.removesuffix("_cn") in PLANTED_LEFT:
        assert not shown, f"{page.name} shows a planted run now: take it out of PLANTED_LEFT"
        return
    assert shown, f"{page.name}: no printed block before the first `## ` heading shows a planted bug's run (RED, False)"


def test_the_planted_runs_lists_are_guidance_pages():
    assert NO_PLANTED | PLANTED_LEFT <= GUIDANCE and not NO_PLANTED & PLANTED_LEFT


def test_the_opening_check_sees_what_a_page_lacks():
    top = "English | [中文](x_cn.md)\n\n# X\n\n"
    program = "```python\nprint(1)\n```\n<!-- block: printed by the block above -->\n```text\n1\n```\n"
    assert opens_as_guidance(top + "What it is for.\n" + program + "\n## Details\n") == []
    assert opens_as_guidance(top + "本页做什么。它怎样用。\n" + program + "\n## 细节\n") == []
    planted = {"three sentences": top + "One. Two. Three.\n" + program + "\n## Details\n",
               "三句": top + "一。二。三。\n" + program + "\n## 细节\n",
               "no heading": top + "What it is for.\n" + program,
               "the program after the heading": top + "What it is for.\n\n## Details\n" + program,
               "its output not shown": top + "What it is for.\n```python\nprint(1)\n```\n\n## Details\n",
               "output not run": top + "For.\n<!-- block: not run (output) -->\n```\n1\n```\n\n## Details\n",
               "an indented command first": top + "For.\n\n    python x.py --flag\n\n" + program + "\n## Details\n"}
    for what, text in planted.items():
        assert opens_as_guidance(text), what
    red = "```python\nprint(False)\n```\n<!-- block: printed by the block above -->\n```text\nFalse\n```\n"
    assert shows_planted(top + "What it is for.\n" + program + "A bug:\n" + red + "\n## Details\n")
    lacking = {"no planted run": top + "What it is for.\n" + program + "\n## Details\n",
               "its red run after the heading": top + "For.\n" + program + "\n## Details\n" + red,
               "red output no test runs": top + "For.\n" + program + "<!-- block: not run (output) -->\n```\n"
                                                                   "forward: RED\n```\n\n## Details\n",
               "a red word inside a line": top + "For.\n" + program.replace("\n1\n", "\nnot False nor REDDISH\n")
                                           + "\n## Details\n"}
    for what, text in lacking.items():
        assert not shows_planted(text), what


# A command's help says what it does; what a module may import is said to the engineer, in its subpackage's docstring
ENGINEERS = re.compile(r"\bmay import\b", re.I)


def help_texts(path) -> list:
    """Every text a parser of `path` shows the user (ast: nothing imported): its description, epilog, usage and each
    help, the module's docstring where it is given as one of them."""
    import ast
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        for kw in node.keywords if isinstance(node, ast.Call) else ():
            if kw.arg not in ("description", "epilog", "usage", "help"):
                continue
            if isinstance(kw.value, ast.Name) and kw.value.id == "__doc__":
                out.append(ast.get_docstring(tree, clean=False) or "")
            else:
                out.append("".join(n.value for n in ast.walk(kw.value) if isinstance(n, ast.Constant)
                                   and isinstance(n.value, str)))
    return out


def commands() -> list:
    """Each file outside tests that builds an argument parser (the library's commands, the project's scripts, the
    tools)."""
    root = paths.ROOT
    folders = [d for d in sorted(root.iterdir()) if d.is_dir() and d.name not in ("tests", "build")
               and not d.name.startswith(".")]
    files = sorted(root.glob("*.py")) + [p for d in folders for p in sorted(d.rglob("*.py"))]
    return [p for p in files if re.search(r"ArgumentParser\(|\.add_parser\(", p.read_text(encoding="utf-8"))]


def told(texts: list) -> list:
    return [m.group(0) for text in texts for m in (*ENGINEERS.finditer(text), *BENCH_HISTORY.finditer(text))]


def test_no_commands_help_tells_history_or_what_a_module_may_import():
    said = {str(p.relative_to(paths.ROOT)): found for p in commands() if (found := told(help_texts(p)))}
    assert said == {}
    assert len(commands()) > 50 and paths.ROOT / "lib" / "portcheck" / "generation" / "command.py" in commands()


def test_the_help_check_sees_a_note_to_the_engineer(tmp_path):
    planted = tmp_path / "command.py"
    planted.write_text('"""python -m x: what it does.\n\nMay import core and forward."""\nimport argparse\n\n'
                       'def add_parser(sub):\n    p = sub.add_parser("x", description=__doc__)\n'
                       '    p.add_argument("--n", help="how many (issue 34)")\n', encoding="utf-8")
    assert told(help_texts(planted)) == ["May import", "issue 34"]
