"""The user pages read as guidance: no sentence tells the project's history (a commit, a round, a branch, the code
before, an issue number) or a machine's load, which live on the benchmark pages; English paragraphs under 80 words
and sentences under 40. The benchmark pages (docs/bench/) say the load their figures were taken at, and tell no
history either.

Pages not yet rewritten so are listed (HISTORY_LEFT, LONG_LEFT, BENCH_HISTORY_LEFT) and held there strictly: a
listed page that passes fails this file until its name leaves the list, so the lists only shrink."""
import re

import pytest

from bert_sst2 import paths

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
