"""Every code block of the READMEs and the docs runs in the suite, and the Chinese pages hold the English ones'.

A block is one of these kinds, said by its language and the comment line before it (`<!-- block: ... -->`):
- ```python: a whole program, never marked: copied into a file in an empty folder and run there, PYTHONPATH the
  repository's lib and root alone, it runs to exit 0; a ```text block marked `<!-- block: printed by the block
  above -->` after it holds lines its output holds, in order (`...` stands for any text). Code that reads as Python
  in a block of another language is red: a fragment is shell or text, never half a program;
- unmarked: shell commands, run here one line at a time from a fresh folder (a script or file of the repository
  named by its path is found there), each to the exit code its comment names ("exits 1"), else 0, the committed
  log_reprod/ left as it was; a printed block after it holds lines of their output (stdout, the commands in turn),
  as after a program;
- `<!-- block: FILE "LABEL" -->`: code the suite runs in FILE, between its `# --- docs: LABEL` and `# --- end`
  lines (every such piece, dedented, one blank line apart);
- `<!-- block: not run (REASON) -->` or `<!-- block: run by tests/test_x.py ... -->`: a block deliberately not run
  here, each reason held to what the block is (a long run names a long script; output holds no command; a
  placeholder holds one; setup commands are .ci/run's; a block run by a test names only scripts that test runs). A
  printed block after a block run by a test is held by that test to what its run printed (printed_blocks).

Cost: a fresh interpreter importing torch and Paddle is ~9 s of CPU, so the pages' programs run in ONE fresh
interpreter (run_programs), each in its own empty folder with fresh globals (runpy.run_path as __main__): what they
share is only modules already imported. docs/own_model.md's six (26 s of CPU together, measured, most of it the
five steps' own work) are run by tests/test_five_steps.py, whose planted bugs start from the hand-in they write; programs that
need transformers and paddlenlp (large_models.md, pairing.md) run in the test file that imports them already
(run_in_process: fresh globals and an empty folder each, in that file's process), each written to stand alone.
"""
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap

import pytest

from bert_sst2 import paths
from conftest import BUILTIN_PAIR as BUILTIN_PAIR_SCRIPT, SETUP, setup_runs

ROOT = paths.ROOT
README, README_CN = ROOT / "README.md", ROOT / "README_cn.md"
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^( *)(?:<!-- block: (?P<mark>[^\n]*?) -->\n\1)?```(?P<lang>[^\n]*)\n(?P<code>.*?)^\1```",
                   re.M | re.S)
PRINTED = "printed by the block above"
PYTHONISH = re.compile(r"^(from \w[\w.]* import |import \w|print\(|\w+ = [\w.]+\()", re.M)
# a page whose programs a test runs: for the hand-in they write, or in a process that imports what they need
RUN_BY = {"own_model.md": "tests/test_five_steps.py", "large_models.md": "tests/test_stream.py",
          "pairing.md": "tests/test_pairing2.py", "generation.md": "tests/test_generate.py"}
COMMAND = re.compile(r"^(python3?|pip|mkdocs|cd|\.) ")
SCRIPT = re.compile(r"\b([\w./-]+\.py)\b")


def pages() -> list:
    return [README, README_CN, *sorted(DOCS.glob("*.md")), *sorted(DOCS.glob("bench/*.md"))]


def blocks(path) -> list:
    """[(marker or None, the block's code, dedented)] of a page, in order; a ```python block's marker is "python"."""
    text = path.read_text(encoding="utf-8")
    return [(language(m.group("lang"), m.group("mark")), textwrap.dedent(m.group("code")))
            for m in BLOCK.finditer(text)]


def language(lang: str, mark):
    """A ```python block's marker: "python", or an unknown one saying a whole program is never marked."""
    if lang.strip() != "python":
        return mark
    return "python" if mark is None else f"python marked {mark!r}: a ```python block is a whole program, run here"


def commands(code: str) -> list:
    """The block's lines that are not blank and not comments."""
    return [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def pieces(path: str, label: str) -> str:
    text = (ROOT / path).read_text()
    found = re.findall(rf"^ *# --- docs: {re.escape(label)}\n(.*?)^ *# --- end\n", text, re.M | re.S)
    return "\n".join(textwrap.dedent(p) for p in found)


def ci_has(command: str) -> bool:
    """Every part of a setup line (split at &&) is a command .ci/run runs (python or python3)."""
    ci = (ROOT / ".ci" / "run").read_text()
    return all(re.sub(r"^python3? ", "", part.strip()) in ci for part in command.split("&&"))


# why a block is not run, and what the block must then be
NOT_RUN = {
    "long": lambda code: re.search(r"run_all\.py|tools/bench_|-m pytest|--data_dir", code),
    "output": lambda code: not any(COMMAND.match(line) for line in commands(code)),
    "not a command": lambda code: not any(COMMAND.match(line) for line in commands(code)),
    "placeholder": lambda code: re.search(r"path/to/|\bmy_\w+|<[a-z][^>]*>", code),
    "setup": lambda code: commands(code) and all(ci_has(line.split("#")[0]) for line in commands(code)),
    "network": lambda code: re.search(r"pip (install|download)[^\n]*\s[A-Za-z][\w-]*(\s|$)", code),
    "serves until stopped": lambda code: commands(code) == [line for line in commands(code) if "mkdocs serve" in line],
}


def kind(mark):
    """("run"), ("file", path, label), ("not run", reason) or ("run by", [test files]) of a marker."""
    if mark is None:
        return ("run",)
    if mark in ("python", PRINTED):
        return (mark,)
    tied = re.fullmatch(r'(\S+) "([^"]+)"', mark)
    if tied:
        return ("file", *tied.groups())
    reason = re.fullmatch(r"not run \(([^):]+)(?::[^)]*)?\)", mark)
    if reason:
        return ("not run", reason.group(1))
    by = re.fullmatch(r"run by ((?:tests/\S+\.py ?)+)", mark)
    if by:
        return ("run by", by.group(1).split())
    return ("unknown", mark)


def all_blocks():
    return [(page, mark, code) for page in pages() for mark, code in blocks(page)]


def test_the_pages_have_blocks_and_every_marker_is_known():
    found = all_blocks()
    assert sum(page == README for page, _, _ in found) >= 4 and len(found) > 30
    for page, mark, code in found:
        assert kind(mark)[0] != "unknown", f"{page.name}: unknown block marker {mark!r}"


def test_chinese_pages_hold_the_english_blocks():
    """README_cn.md's blocks are README.md's, and each docs/<name>_cn.md's are docs/<name>.md's, markers too."""
    pairs = [(README, README_CN)] + [(DOCS / f"{p.stem[:-3]}.md", p) for p in sorted(DOCS.glob("*_cn.md"))]
    assert len(pairs) >= 9
    for en, cn in pairs:
        assert en.is_file(), f"{cn.name} has no English page"
        assert blocks(en) == blocks(cn), f"{cn.name}'s blocks are not {en.name}'s"
        first = [p.read_text(encoding="utf-8").splitlines()[0] for p in (en, cn)]
        assert cn.name in first[0] and en.name in first[1], "each page links to the other language on its first line"


def test_every_block_tied_to_a_file_is_that_files_code():
    tied = [(page, kind(mark), code) for page, mark, code in all_blocks() if kind(mark)[0] == "file"]
    for page, (_, path, label), code in tied:
        assert (ROOT / path).is_file(), f"{page.name}: {path} is not a file"
        assert pieces(path, label) and code == pieces(path, label), \
            f"{page.name}'s block {label!r} is not {path}'s code marked `# --- docs: {label}`"


def test_a_block_is_marked_not_run_only_for_its_reason():
    for page, mark, code in all_blocks():
        what = kind(mark)
        if what[0] == "not run":
            assert what[1] in NOT_RUN, f"{page.name}: {what[1]!r} is no reason to leave a block unrun"
            assert NOT_RUN[what[1]](code), f"{page.name}: a block marked {mark!r} is not that:\n{code}"
        elif what[0] == "run by":
            ran = "".join((ROOT / f).read_text() for f in what[1])
            for script in SCRIPT.findall(code):
                assert script in ran or script.rsplit("/", 1)[-1] in ran, \
                    f"{page.name}: {script} is not run by {', '.join(what[1])}"
            assert SCRIPT.findall(code), f"{page.name}: a block 'run by' a test names no script"


def test_python_reads_as_python_only_in_a_python_block():
    """A fragment of Python in a shell or text block would be half a program no one runs: it is a whole ```python
    block, or not Python. A printed block follows the program, the commands or the block a test runs whose output
    it holds."""
    for page in pages():
        found = blocks(page)
        for i, (mark, code) in enumerate(found):
            if mark != "python":
                assert not PYTHONISH.search(code), f"{page.name}: Python outside a ```python block:\n{code}"
            if mark == PRINTED:
                assert i and runs(found[i - 1][0]), f"{page.name}: a printed block follows no block that runs"
    assert not PYTHONISH.search("python -m portcheck check log_reprod\nmkdocs build --strict\n")
    assert PYTHONISH.search("report = stream.compare(a, b)\n") and PYTHONISH.search("from portcheck import stream\n")
    assert kind(language("python", "not run (long)"))[0] == "unknown"   # a whole program is never left unrun


@pytest.mark.parametrize("planted, reason", [("python pipeline/check_log_reprod.py log_reprod\n", "long"),
                                             ("python examples/quickstart.py\n", "output"),
                                             ("python -m portcheck check log_reprod\n", "placeholder"),
                                             ("pip install portcheck-extra\n", "setup")])
def test_a_marker_on_a_block_it_does_not_fit_is_red(planted, reason):
    assert not NOT_RUN[reason](planted)


def runs(mark) -> bool:
    """A block whose output a printed block after it may hold: a program, commands run here, or a test's."""
    return mark == "python" or kind(mark)[0] in ("run", "run by")


def printed_blocks(page) -> list:
    """[(marker, code, the lines its page says it prints)] of a page's blocks that are no program and have a
    printed block after them, in order."""
    found = blocks(page)
    return [(mark, code, after[1].splitlines()) for (mark, code), after in zip(found, found[1:])
            if mark != "python" and after[0] == PRINTED]


def unmarked():
    """Each unmarked block once (the same commands on several pages run once): (code, the first page holding it,
    [the lines each page's printed block after it says it prints])."""
    seen = {}
    for page in pages():
        said = {code: lines for mark, code, lines in printed_blocks(page) if mark is None}
        for mark, code in blocks(page):
            if mark is None:
                seen.setdefault(code, (page, []))[1].append(said.get(code, []))
    return sorted(((code, page, said) for code, (page, said) in seen.items()), key=lambda item: item[1].name)


def expected_exit(line: str) -> int:
    said = re.search(r"#.*\bexits? (\d+)", line)
    return int(said.group(1)) if said else 0


def run_line(line: str, cwd, env):
    """One command: a path of the repository (a script, log_reprod) that the fresh folder does not hold is the
    repository's. A repository script run under a home (BERT_ALIGN_HOME) runs as every test runs one, through
    tests/conftest.run: forked from a process that imported its framework once, with the same exit status, output
    and bytes as a new interpreter, which would import its framework again for each of the README's five steps' 24
    scripts (the block: 104 s of CPU so, measured -n 0)."""
    command = line.split(" #")[0]
    said = shlex.split(command)
    words = [str(ROOT / w) if not (cwd / w).exists() and (ROOT / w).exists() and "/" in w or
             (w == "log_reprod" and not (cwd / w).exists()) else w for w in said]
    if said[0] == "python" and len(said) > 1 and SCRIPT.fullmatch(said[1]) and words[1] != said[1] \
            and "BERT_ALIGN_HOME" in env:
        from conftest import run
        return run(said[1], *words[2:], home=env["BERT_ALIGN_HOME"], cwd=cwd)
    words = [sys.executable if w == "python" else w for w in words]
    return subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True)


def committed_hand_in() -> str:
    """A digest of the committed log_reprod/ (every file's name and bytes): the reference no page's commands write."""
    digest = hashlib.sha256()
    for path in sorted(p for p in (ROOT / "log_reprod").rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


# the README's first green: its block (then the reviewer's command on what it wrote) and examples.md's lines after it,
# and the picture and weights it hands in, all read from one run of it (a fresh interpreter: 5 s of CPU)
QUICKSTART = "python examples/quickstart.py"


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    """QUICKSTART run once in an empty folder, as a block's line runs: (its process, the folder)."""
    folder = tmp_path_factory.mktemp("quickstart")
    return run_line(QUICKSTART, folder, dict(os.environ, BERT_ALIGN_HOME=str(folder / "home"),
                                             PYTHONWARNINGS="ignore")), folder


# the README's setup lines, the SETUP scripts with no flags, are conftest's minilm_home: those scripts run once per
# suite run as the block runs them (its build), each line's exit and output read from there and what they write (the
# home) copied in; docs/examples.md's builtin_pair.py line is conftest's one run of it (builtin_pair_run)
BUILTIN_PAIR = f"python {BUILTIN_PAIR_SCRIPT}"


def setup_script(line: str):
    """The SETUP script a line runs with no flags, or None."""
    said = shlex.split(line.split(" #")[0])
    return said[1] if said[0] == "python" and len(said) == 2 and said[1] in SETUP else None


@pytest.mark.parametrize("code, page, said", unmarked(), ids=lambda v: v.name if hasattr(v, "name") else "")
def test_every_unmarked_block_runs_and_prints_what_its_pages_say(code, page, said, tmp_path, request):
    env = dict(os.environ, BERT_ALIGN_HOME=str(tmp_path / "home"), PYTHONWARNINGS="ignore")
    output, reference, taken = "", committed_hand_in(), []
    for line in commands(code):
        assert COMMAND.match(line), f"{page.name}: {line!r} is no command: mark the block (<!-- block: ... -->)"
        if line.split(" #")[0].strip() == QUICKSTART:  # its one run, what it wrote copied into this empty folder
            proc, folder = request.getfixturevalue("quickstart")
            for written in folder.iterdir():
                shutil.copytree(written, tmp_path / written.name, symlinks=True)
        elif line.split(" #")[0].strip() == BUILTIN_PAIR:  # it writes nothing
            proc = request.getfixturevalue("builtin_pair_run")
        elif setup_script(line):
            built = request.getfixturevalue("minilm_home")
            if not taken:
                shutil.copytree(built, tmp_path / "home")
            taken.append(setup_script(line))
            proc = setup_runs(built)[taken[-1]]
        else:
            proc = run_line(line, tmp_path, env)
        assert proc.returncode == expected_exit(line), f"{page.name}: {line}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        output += proc.stdout
    for lines in said:
        assert not printed_as_said(output, lines), f"{page.name}: {code} did not print " \
                                                   f"{printed_as_said(output, lines)!r}:\n{output[-3000:]}"
    assert committed_hand_in() == reference, f"{page.name}: {code} wrote the committed log_reprod/"
    assert taken in ([], SETUP), f"{page.name}: its setup lines are not SETUP's scripts in turn (minilm_home's)"


def test_the_first_green_hands_in_its_picture_and_each_sides_weights(quickstart):
    """The README's first green (run above): its hand-in holds the comparison's picture, and each side's run
    record fingerprints that side's own weights (equal: the Paddle model holds torch's)."""
    import json
    proc, folder = quickstart
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (mark, code, said), = printed_blocks(DOCS / "examples.md")[:1]   # the page's first block: this run's
    assert code.strip() == QUICKSTART, code
    assert not printed_as_said(proc.stdout, said), f"did not print {printed_as_said(proc.stdout, said)!r}"
    top = folder / "portcheck_quickstart" / "log_reprod"
    assert (top / "diagnostics" / "forward_modules.png").read_bytes()[:4] == b"\x89PNG"
    # the picture is where the script says it is, and where the READMEs say
    shown = "portcheck_quickstart/log_reprod/diagnostics/forward_modules.png"
    assert f"plot: {shown}" in proc.stdout.splitlines(), proc.stdout
    for readme in ("README.md", "README_cn.md"):
        assert f"`{shown}`" in (paths.ROOT / readme).read_text(encoding="utf-8"), readme
    weights = [json.loads((top / "diagnostics" / f"forward_{side}.run.json").read_text())["depends"]["weights"]
               for side in ("torch", "paddle")]
    assert weights[0] == weights[1]


# ---- ```python blocks: whole programs, each alone in an empty folder ----

RUN = """
import contextlib, io, os, runpy, traceback


def run(paths, done=lambda results: None):
    \"\"\"[[exit status, stdout]] of each program file, run with fresh globals as __main__ from its own folder.\"\"\"
    results, cwd = [], os.getcwd()
    for path in paths:
        os.chdir(os.path.dirname(path))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                runpy.run_path(path, run_name="__main__")
                status = 0
            except SystemExit as stop:
                status = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
            except BaseException:
                out.write(traceback.format_exc())
                status = 1
        os.chdir(cwd)
        results.append([status, out.getvalue()])
        done(results)
    return results
"""
RUNNER = RUN + """
import json, sys
run(sys.argv[2:], lambda results: open(sys.argv[1], "w").write(json.dumps(results)))
"""


def block_files(programs, folder) -> list:
    """Each program written to folder/block<i>/block.py, a folder of its own, empty but for it."""
    files = []
    for i, code in enumerate(programs):
        (folder / f"block{i}").mkdir()
        files.append(folder / f"block{i}" / "block.py")
        files[-1].write_text(code, encoding="utf-8")
    return files


def run_in_process(programs, folder) -> list:
    """run_programs in this process: for a test file that imports the heavy libraries a page's programs need
    (transformers, paddlenlp) already, where a fresh interpreter would cost ~15 s of CPU more for them alone."""
    scope = {}
    exec(RUN, scope)
    return [tuple(r) for r in scope["run"](list(map(str, block_files(programs, folder))))]


def python_blocks(page) -> list:
    """[(program, the lines its page says it prints)] of a page's ```python blocks, in order."""
    found, programs = blocks(page), []
    for i, (mark, code) in enumerate(found):
        if mark == "python":
            after = found[i + 1] if i + 1 < len(found) else (None, "")
            programs.append((code, after[1].splitlines() if after[0] == PRINTED else []))
    return programs


def run_programs(programs, folder) -> list:
    """[(exit status, stdout)] of each program, run in folder/block<i>/ (empty but for block.py), all in one fresh
    interpreter (the module docstring says why), PYTHONPATH the repository's lib and root alone."""
    files = block_files(programs, folder)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "lib"), str(ROOT)]), PYTHONWARNINGS="ignore",
               BERT_ALIGN_HOME=str(folder / "home"))
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(folder / "results.json"), *map(str, files)], cwd=folder,
                          env=env, capture_output=True, text=True)
    done = json.loads((folder / "results.json").read_text()) if (folder / "results.json").exists() else []
    return [tuple(r) for r in done] + [(proc.returncode or 1, proc.stderr[-3000:])] * (len(files) - len(done))


def printed_as_said(output: str, said: list) -> str:
    """"" when each line said (`...`: any text) is within a line of the output, in order; else the first one not."""
    lines = iter(output.splitlines())
    for line in said:
        pattern = re.compile(".*".join(re.escape(part.strip()) for part in line.split("...")))
        if not any(pattern.search(out) for out in lines):
            return line
    return ""


def test_printed_as_said_reads_the_output_in_order():
    out = "pairs\nTrue None\nmeasured green (largest: logits max 8.9e-08)\n"
    assert printed_as_said(out, ["True None", "measured green (largest: logits max ..."]) == ""
    assert printed_as_said(out, ["measured green ...", "True None"]) == "True None"   # out of order
    assert printed_as_said(out, ["measured RED ..."]) == "measured RED ..."


PROGRAMS = [(page, i) for page in pages() if not page.stem.endswith("_cn") and page.name not in RUN_BY
            for i in range(len(python_blocks(page)))]


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory):
    """{page: [(exit status, output)] of its programs}: every page's, run at once in one fresh interpreter (a
    program two pages hold, once)."""
    programs = [python_blocks(page)[i][0] for page, i in PROGRAMS]
    once = list(dict.fromkeys(programs))
    done = dict(zip(once, run_programs(once, tmp_path_factory.mktemp("pages"))))
    by_page = {}
    for (page, _), code in zip(PROGRAMS, programs):
        by_page.setdefault(page, []).append(done[code])
    return by_page.__getitem__


@pytest.mark.parametrize("page, i", PROGRAMS, ids=[f"{p.name}-{i}" for p, i in PROGRAMS])
def test_every_python_block_runs_alone_and_prints_what_its_page_says(page_runs, page, i):
    status, output = page_runs(page)[i]
    code, said = python_blocks(page)[i]
    assert status == 0, f"{page.name}'s block {i} exits {status}:\n{code}\n{output[-3000:]}"
    assert not printed_as_said(output, said), f"{page.name}'s block {i} did not print {printed_as_said(output, said)!r}"


def test_a_page_whose_programs_a_test_runs_is_run_by_it():
    for name, test in RUN_BY.items():
        assert python_blocks(DOCS / name) and f'python_blocks(DOCS / "{name}")' in (ROOT / test).read_text(), test


def test_what_a_block_a_test_runs_prints_is_held_by_that_test():
    """A printed block after a block `run by` a test: one of the tests it names reads the page's printed blocks."""
    held = [(page, kind(mark)[1]) for page in pages() if not page.stem.endswith("_cn") and page != README_CN
            for mark, _, _ in printed_blocks(page) if kind(mark)[0] == "run by"]
    assert len(held) >= 2
    for page, tests in held:
        name = page.name if page.parent == DOCS else page.relative_to(ROOT)
        assert any(f'printed_blocks(DOCS / "{name}")' in (ROOT / t).read_text() for t in tests), (name, tests)


def unread(markdown) -> list:
    """Of the Markdown files given, each holding a ```python block on no page this file reads (pages()): a whole
    program no test would run (an example's README, a pipeline step's)."""
    read = set(pages())
    return [p for p in markdown if p not in read and any(str(mark).startswith("python") for mark, _ in blocks(p))]


def test_a_python_block_is_only_on_a_page_whose_programs_are_run(tmp_path):
    from test_links import PAGES as MARKDOWN   # every Markdown file the repository holds
    assert len(MARKDOWN) > len(pages()) and unread([ROOT / p for p in MARKDOWN]) == []
    planted = tmp_path / "README.md"             # an example's README holding a program
    planted.write_text("Run it:\n```python\nprint('hello')\n```\n", encoding="utf-8")
    assert unread([planted, README]) == [planted]
