"""Every code block of the READMEs and the docs runs in the suite, and the Chinese pages hold the English ones'.

A block is one of three kinds, said by the comment line before it (`<!-- block: ... -->`):
- unmarked: shell commands, run here one line at a time from a fresh folder (a script or file of the repository
  named by its path is found there), each to the exit code its comment names ("exits 1"), else 0;
- `<!-- block: FILE "LABEL" -->`: code the suite runs in FILE, between its `# --- docs: LABEL` and `# --- end`
  lines (every such piece, dedented, one blank line apart);
- `<!-- block: not run (REASON) -->` or `<!-- block: run by tests/test_x.py ... -->`: a block deliberately not run
  here, each reason held to what the block is (a long run names a long script; output holds no command; a
  placeholder holds one; setup commands are .ci/run's; a block run by a test names only scripts that test runs).
"""
import os
import re
import shlex
import subprocess
import sys
import textwrap

import pytest

from bert_sst2 import paths

ROOT = paths.ROOT
README, README_CN = ROOT / "README.md", ROOT / "README_cn.md"
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^( *)(?:<!-- block: (?P<mark>[^\n]*?) -->\n\1)?```[^\n]*\n(?P<code>.*?)^\1```", re.M | re.S)
COMMAND = re.compile(r"^(python3?|pip|mkdocs|cd|\.) ")
SCRIPT = re.compile(r"\b([\w./-]+\.py)\b")


def pages() -> list:
    return [README, README_CN, *sorted(DOCS.glob("*.md"))]


def blocks(path) -> list:
    """[(marker or None, the block's code, dedented)] of a page, in order."""
    text = path.read_text(encoding="utf-8")
    return [(m.group("mark"), textwrap.dedent(m.group("code"))) for m in BLOCK.finditer(text)]


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
    assert {k[1] for _, k, _ in tied} >= {"examples/quickstart.py", "tests/test_five_steps.py"}
    for page, (_, path, label), code in tied:
        assert (ROOT / path).is_file(), f"{page.name}: {path} is not a file"
        assert pieces(path, label) and code == pieces(path, label), \
            f"{page.name}'s block {label!r} is not {path}'s code marked `# --- docs: {label}`"
    own = [k[2] for page, k, _ in tied if page.name == "own_model.md"]
    assert own == ["Step 1", "Step 2", "Step 3", "Step 4", "Step 5"], own  # all five steps, in order


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


@pytest.mark.parametrize("planted, reason", [("python pipeline/check_log_reprod.py log_reprod\n", "long"),
                                             ("python examples/quickstart.py\n", "output"),
                                             ("python -m portcheck check log_reprod\n", "placeholder"),
                                             ("pip install portcheck-extra\n", "setup")])
def test_a_marker_on_a_block_it_does_not_fit_is_red(planted, reason):
    assert not NOT_RUN[reason](planted)


def unmarked():
    """Each unmarked block once (the same commands on several pages run once)."""
    seen = {}
    for page, mark, code in all_blocks():
        if mark is None:
            seen.setdefault(code, page)
    return sorted(seen.items(), key=lambda item: item[1].name)


def expected_exit(line: str) -> int:
    said = re.search(r"#.*\bexits? (\d+)", line)
    return int(said.group(1)) if said else 0


def run_line(line: str, cwd, env):
    """One command: a path of the repository (a script, log_reprod) that the fresh folder does not hold is the
    repository's."""
    command = line.split(" #")[0]
    words = [str(ROOT / w) if not (cwd / w).exists() and (ROOT / w).exists() and "/" in w or
             (w == "log_reprod" and not (cwd / w).exists()) else w for w in shlex.split(command)]
    words = [sys.executable if w == "python" else w for w in words]
    return subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True)


@pytest.mark.parametrize("code, page", unmarked(), ids=lambda v: v.name if hasattr(v, "name") else "")
def test_every_unmarked_block_runs(code, page, tmp_path):
    env = dict(os.environ, BERT_ALIGN_HOME=str(tmp_path / "home"), PYTHONWARNINGS="ignore")
    for line in commands(code):
        assert COMMAND.match(line), f"{page.name}: {line!r} is no command: mark the block (<!-- block: ... -->)"
        proc = run_line(line, tmp_path, env)
        assert proc.returncode == expected_exit(line), f"{page.name}: {line}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_the_first_green_hands_in_its_picture_and_each_sides_weights(tmp_path):
    """The README's first green (run above): its hand-in holds the comparison's picture, and each side's run
    record fingerprints that side's own weights (equal: the Paddle model holds torch's)."""
    import json
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = run_line("python examples/quickstart.py", tmp_path, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    top = tmp_path / "portcheck_quickstart" / "log_reprod"
    assert (top / "diagnostics" / "forward_modules.png").read_bytes()[:4] == b"\x89PNG"
    # the picture is where the script says it is, and where the READMEs say
    shown = "portcheck_quickstart/log_reprod/diagnostics/forward_modules.png"
    assert f"plot: {shown}" in proc.stdout.splitlines(), proc.stdout
    for readme in ("README.md", "README_cn.md"):
        assert f"`{shown}`" in (paths.ROOT / readme).read_text(encoding="utf-8"), readme
    weights = [json.loads((top / "diagnostics" / f"forward_{side}.run.json").read_text())["depends"]["weights"]
               for side in ("torch", "paddle")]
    assert weights[0] == weights[1]
