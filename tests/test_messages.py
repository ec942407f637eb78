"""docs/messages.md (and its Chinese twin) held to the library: a refusal or red line that ends with a code
(`[PC002]`) has its entry on the page, and every entry a line of lib/portcheck that prints its code, once. An entry
quotes its line: the words the library writes just before the code are in the entry's quoted line."""
import re

import pytest

from bert_sst2 import paths
from portcheck.core import errors
from portcheck.pipeline import handin
from portcheck.core.errors import PipelineError

LIB = paths.ROOT / "lib" / "portcheck"
PAGES = [paths.ROOT / "docs" / "messages.md", paths.ROOT / "docs" / "messages_cn.md"]
CODE = re.compile(r"\[(PC\d{3})\]")
ENTRY = re.compile(r"^### (PC\d{3})\n+`(?P<line>[^`\n]+)`\n+(?P<body>.*?)(?=^##|\Z)", re.M | re.S)


def codes_in(sources: dict) -> dict:
    """{code: [(file, the words before it in its string)]} of every `[PCnnn]` in the sources ({name: text})."""
    found = {}
    for name, text in sources.items():
        for m in CODE.finditer(text):
            before = re.search(r"([^{}\"'\n]*)$", text[:m.start()]).group(1).strip()
            found.setdefault(m.group(1), []).append((name, before))
    return found


def entries(text: str) -> dict:
    """{code: (its quoted line, what the entry says)} of a page."""
    return {m.group(1): (m.group("line"), m.group("body")) for m in ENTRY.finditer(text)}


def unmatched(library: dict, page: dict) -> list:
    """Why the page and the library part: a code without its entry, an entry without its line, a code printed by
    two lines, an entry whose quoted line lacks the words the library writes before its code."""
    problems = [f"{c} is printed by the library and has no entry" for c in sorted(set(library) - set(page))]
    problems += [f"{c} has an entry and no line of the library prints it" for c in sorted(set(page) - set(library))]
    problems += [f"{c} is printed by {len(sites)} lines" for c, sites in sorted(library.items()) if len(sites) > 1]
    for code, sites in sorted(library.items()):
        if code in page:
            quoted = page[code][0]
            problems += [f"{code}: the entry's line lacks {before!r}" for _, before in sites
                         if before not in quoted or not quoted.endswith(f"[{code}]")]
    return problems


def library() -> dict:
    return codes_in({p.name: p.read_text(encoding="utf-8") for p in sorted(LIB.rglob("*.py"))})


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_code_the_library_prints_has_its_entry_and_every_entry_its_line(page):
    found, listed = library(), entries(page.read_text(encoding="utf-8"))
    assert len(found) >= 10, sorted(found)
    assert unmatched(found, listed) == []
    for code, (_, body) in listed.items():  # what it means, what to do
        assert ("**Means:**" in body and "**Do:**" in body) or ("**含义：**" in body and "**怎么做：**" in body), code


def test_the_two_pages_list_the_same_codes_in_the_same_order():
    assert [list(entries(p.read_text(encoding="utf-8"))) for p in PAGES][0] == \
        [list(entries(p.read_text(encoding="utf-8"))) for p in PAGES][1]


def test_a_page_out_of_step_with_the_library_is_red():
    lib = codes_in({"a.py": 'raise PipelineError(f"{path} not found: {how} [PC002]")\n'
                            'return "measured RED (no keys) [PC106]"\n'})
    page = entries("### PC002\n\n`<path> not found: <how> [PC002]`\n\n**Means:** m **Do:** d\n")
    assert unmatched(lib, page) == ["PC106 is printed by the library and has no entry"]
    page = entries("### PC002\n\n`<path> not found: <how> [PC002]`\n\nx\n### PC106\n\n`measured RED [PC106]`\n\nx\n"
                   "### PC999\n\n`gone [PC999]`\n\nx\n")
    assert unmatched(lib, page) == ["PC999 has an entry and no line of the library prints it",
                                    "PC106: the entry's line lacks 'measured RED (no keys)'"]
    twice = codes_in({"a.py": '"one [PC001]"\n', "b.py": '"two [PC001]"\n'})
    assert unmatched(twice, entries("### PC001\n\n`one two [PC001]`\n\nx\n")) == ["PC001 is printed by 2 lines"]


def test_a_refusal_and_a_red_line_carry_their_code_as_printed(tmp_path):
    with pytest.raises(PipelineError, match=r"not found: run `python x.py` first \[PC002\]$"):
        errors.require(tmp_path / "missing.npy", "python x.py")
    assert handin.describe_strict(None, 1e-6, copy="the Paddle file is the torch file").endswith("[PC103]")
