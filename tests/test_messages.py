"""docs/messages.md (and its Chinese twin) held to the library: a refusal or red line that ends with a code
(`[PC002]`) has its entry on the page, and every entry a line of lib/portcheck that prints its code (one template,
written once or at several places in the same words). An entry quotes its line: the words the library writes just
before the code are in the entry's quoted line. And every refusal (a PipelineError, an Interrupted, a recorder's
refuse, an errors.fail) and every RED line of the library carries a code, read from its source with `ast`."""
import ast
import re

import pytest

from bert_sst2 import paths
from portcheck.core import errors
from portcheck.pipeline import guide
from portcheck.core.errors import PipelineError

LIB = paths.ROOT / "lib" / "portcheck"
PAGES = [paths.ROOT / "docs" / "messages.md", paths.ROOT / "docs" / "messages_cn.md"]
CODE = re.compile(r"\[(PC\d{3})\]")
ENTRY = re.compile(r"^### (PC\d{3})\n+(?P<tick>`+) ?(?P<line>[^\n]+?) ?(?P=tick)\n+(?P<body>.*?)(?=^##|\Z)", re.M | re.S)
# what raises or prints a refusal: errors' two classes, the recorder's refuse (portcheck run), errors.fail
REFUSALS = {"PipelineError", "Interrupted", "refuse", "fail"}
RED = re.compile(r"\bRED\b|^error: ")  # a red line says so; a refusal printed by hand starts as fail()'s do
# Lines that pass on a message made elsewhere, which carries its own code; (file, words of the line) -> why
EXEMPT = {
    ("errors.py", "fail(str(e)"): "run_main prints a PipelineError's or an Interrupted's own line, coded where raised",
    ("errors.py", 'print(f"error: {msg}"'): "fail() itself: its callers' lines are coded",
    ("fileio.py", "PipelineError(problem)"): "_missing's lines, each coded",
    ("layouts.py", "{key!r}: {e}"): "Fused's own refusal (PC309-PC311), said with the file and key it came from",
    ("pairing.py", "PipelineError(ambiguity("): "ambiguity's line ends with PC317",
    ("loose.py", "PipelineError(either_line("): "either_line's line ends with PC455",
    ("settle.py", "PipelineError(either.line("): "loose.Either.line is either_line's, ending with PC455",
    ("settle.py", "PipelineError(first.line("): "loose.Either.line is either_line's, ending with PC455",
    ("paddle_start.py", "self.run.refuse(squares[0])"): "loose.square_held's lines, PC455's (either_line)",
    ("recorder.py", "Refused(why)"): "refuse() itself: its callers' lines are coded",
    ("full.py", "self.refuse(str(e))"): "metrics()' ValueError, coded PC832",
    ("first_call.py", "run.refuse(str(e))"): "hook_points' refusal of a module's name, coded PC972",
    ("paddle_start.py", "does not pair with the torch model's: {e}"): "the pairing's refusal (PC3xx) inside it",
    ("hooks_torch.py", "docs/run.md): {e}"): "convert's unknown-layout refusal (PC011) inside it",
    ("folders.py", "cannot be checked: {status['error']}"): "the recorder's refusal (PC823-PC832), coded where refused",
    ("cli.py", "f\"{name}: {'RED' if red else 'green'}\""): "a pair line's head: each red part after it is coded",
    ("judge_run.py", "{'green' if v.passed else 'RED'} | {v.describe_measured()}"): "describe_measured codes it (PC105-PC108, PC149)",
    ("page.py", "\"GREEN\" if data.get(\"passed\") else \"RED\""): "a page's header word, never printed: the lines "
    "the page shows are coded where made",
    ("page.py", "row.get(\"verdict\") == \"RED\""): "report.figures' verdict word, read to colour a row",
    ("result.py", "'green' if self.passed else 'RED'"): "a page's verdict label, never printed; the report's "
    "table it shows below is coded where made",
    ("run.py", "train_align {verdict.describe_measured()}"): "describe_measured codes it",
    ("judge_run.py", "f\"{'NOT GREEN' if unjudged else 'RED' if red else 'green'}: \" + ("): "run's last line, a summary of the coded lines above it",
    ("run.py", "of {len(codes)} red (each"): "the ranks' summary: each rank's own lines are coded",
    ("paddle_start.py", "self.run.refuse(self.standins_error)"): "standins' refusal (PC425, PC428), coded there",
    ("paddle_start.py", "self.run.refuse(split.stopped(rec.arrays, e))"): "split_ranks.stopped's line, coded PC936",
    ("split_ranks.py", "print(f\"\\n{'RED' if code or said else 'green'}: \" + ("): "the joined ranks' summary: "
    "the loss line (PC933) and the judged lines above it are coded",
    ("report.py", "\"not judged\" if not r.judged"): "a DataFrame's cell (frame()), not a line",
    ("folder.py", "f\"{step}: {'green' if verdict.passed else 'RED'}\""): "a step's head on the steps' page, never "
    "printed: its pair's lines beneath it are coded where made",
}


def codes_in(sources: dict) -> dict:
    """{code: [(file, the words before it in its string)]} of every `[PCnnn]` in the sources ({name: text})."""
    found = {}
    for name, text in sources.items():
        for m in CODE.finditer(text):
            line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
            before = re.search(r"([^{}\"']*)$", line).group(1).strip()
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
    problems += [f"{c} is printed by {len(sites)} lines" for c, sites in sorted(library.items())
                 if not all(max((b for _, b in sites), key=len).endswith(before) for _, before in sites)]
    for code, sites in sorted(library.items()):
        if code in page:
            quoted = page[code][0]
            problems += [f"{code}: the entry's line lacks {before!r}" for _, before in sites
                         if before not in quoted or not quoted.endswith(f"[{code}]")]
    return problems


def library() -> dict:
    return codes_in(sources())


def sources() -> dict:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(LIB.rglob("*.py"))}


def uncoded(sources: dict, exempt: dict = EXEMPT) -> list:
    """`file:line` of each refusal (a call in REFUSALS with a message) and each statement writing RED whose source
    holds no code, but for the exempt ones (a line that passes on another's coded message)."""
    out = []
    for name, text in sources.items():
        said, docs, lines = [], set(), text.splitlines()
        stack = [(ast.parse(text), None)]
        while stack:  # each node with the statement that holds it
            node, statement = stack.pop()
            statement = node if isinstance(node, ast.stmt) else statement
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
                docs.add(id(body[0].value))  # a docstring may say RED
            if isinstance(node, ast.Call) and node.args and getattr(node.func, "id", getattr(node.func, "attr", "")) \
                    in REFUSALS | {"Refused"}:
                said.append(node)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and RED.search(node.value) \
                    and id(node) not in docs:
                said.append(statement)
            stack += [(child, statement) for child in ast.iter_child_nodes(node)]
        for node in said:
            segment = "\n".join(lines[node.lineno - 1:node.end_lineno])[node.col_offset:]
            if not CODE.search(segment) and not any(n == name and words in segment for n, words in exempt):
                out.append(f"{name}:{node.lineno}: {segment.splitlines()[0].strip()[:80]}")
    return sorted(set(out))


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
    assert guide.describe_strict(None, 1e-6, copy="the Paddle file is the torch file").endswith("[PC103]")


def test_every_refusal_and_red_line_of_the_library_carries_its_code():
    assert uncoded(sources()) == []
    found = sources()  # each exemption still names a line of the library: none left standing for a line gone
    assert [key for key in EXEMPT if key[0] not in found or key[1] not in found[key[0]]] == []


def test_an_uncoded_refusal_or_red_line_is_caught():
    planted = ('def f(x):\n'
               '    """a docstring may say RED"""\n'
               '    raise PipelineError(f"{x} is wrong: fix it")\n'
               '    raise PipelineError(f"{x} is wrong: fix it [PC200]")\n'
               '    raise RUN.refuse("it compiles its model")\n'
               '    print(f"{x}: {\'green\' if x else \'RED\'} (figures)")\n'
               '    print(f"{x}: RED (figures) [PC201]")\n'
               '    fail(f"{x}: stopped")\n'
               '    raise PipelineError(problem)\n'
               '    print("error: interrupted while loading", file=sys.stderr)\n')
    assert uncoded({"a.py": planted}, exempt={("a.py", "PipelineError(problem)"): "coded where made"}) == [
        "a.py:10: print(\"error: interrupted while loading\", file=sys.stderr)",
        "a.py:3: PipelineError(f\"{x} is wrong: fix it\")",
        "a.py:5: RUN.refuse(\"it compiles its model\")",
        "a.py:6: print(f\"{x}: {\'green\' if x else \'RED\'} (figures)\")",
        "a.py:8: fail(f\"{x}: stopped\")"]
    assert uncoded({"a.py": planted}, exempt={})[-1] == "a.py:9: PipelineError(problem)"


def figure_words(*functions) -> list:
    """The fixed words (two or more) of the f-strings the functions write: what every line they make holds."""
    import inspect
    import textwrap
    found = []
    for f in functions:
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(f)))):
            if isinstance(node, ast.JoinedStr):
                found += [v.value.strip(" ,") for v in node.values if isinstance(v, ast.Constant)
                          and len(v.value.strip(" ,").split()) > 1]
    return found


def test_pc108s_entry_quotes_every_form_of_the_figures_its_line_carries():
    """A measured RED's figures are written by KeyResult.key_figures in one of its forms (K x torch's error, the
    floor, torch's spread, ulps): the entry quotes each, so a reader finds the line they have (the floor's was
    missing: its line read 'beyond the floor ... the allowance here: ...' and the entry only '= <n> x ...')."""
    from portcheck.core import calibrated, diff
    words = figure_words(diff.KeyResult.key_figures, calibrated.Measured.floor_said)
    assert len(words) >= 5 and "the floor" in words, words
    for page in PAGES:
        entry = entries(page.read_text(encoding="utf-8"))["PC108"][1]
        assert [w for w in words if w not in entry] == [], page.name
