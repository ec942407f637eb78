"""Every link in every Markdown file of the repository (the READMEs, the examples', the pipeline steps', the docs)
leads somewhere: a relative link to a file or folder the repository holds (committed, not one a run generates),
an #anchor to a heading of its page. The docs site's build checks the docs' own links (tests/test_docs_site.py);
GitHub shows all the others, so anchors are GitHub's: a heading's text, lower case, its punctuation dropped, its
spaces hyphens. Pure Python: no framework is imported."""
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^( *)(```|~~~).*?^\1\2", re.M | re.S)
CODE = re.compile(r"(`+).+?\1", re.S)
LINK = re.compile(r"!?\[((?:[^\[\]\n]|\[[^\]\n]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML = re.compile(r"<(?:a|img)\s[^>]*?(?:href|src)=\"([^\"]+)\"", re.I)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def committed() -> set:
    """Every file the repository holds and every folder above one, relative to ROOT."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        files = {Path(os.fsdecode(f)) for f in out.split(b"\0") if f}
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked archive): what is there
        files = {p.relative_to(ROOT) for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts}
    return files | {parent for f in files for parent in f.parents}


HELD = committed()
PAGES = sorted(f for f in HELD if f.suffix == ".md" and (ROOT / f).is_file())


def prose(text: str) -> str:
    """A page without its code blocks and code spans: a link written inside code is an example, not a link."""
    return CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its shown text (code marks, emphasis and link targets dropped), lower case,
    every character but a letter, a digit, a space, a hyphen and an underscore dropped, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = "".join(c for c in text.lower() if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def anchors(page: Path) -> set:
    seen, out = {}, set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list:
    text = prose(page.read_text(encoding="utf-8"))
    return [m.group(2) for m in LINK.finditer(text)] + HTML.findall(text)


def broken(page: Path) -> list:
    """Each link of `page` (relative to ROOT) that leads nowhere, with why."""
    bad = []
    for target in links(ROOT / page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # a web address or mailto: not followed here (no network in the suite)
        path, _, anchor = target.partition("#")
        dest = Path(os.path.normpath(page.parent / path)) if path else page
        if path.startswith("/") or dest.parts[:1] == ("..",):
            bad.append(f"{page}: ({target}) leaves the repository")
        elif dest not in HELD:
            bad.append(f"{page}: ({target}) leads to {dest.as_posix()}, which the repository does not hold")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(ROOT / dest):
            bad.append(f"{page}: ({target}) names no heading of {dest.as_posix()}")
    return bad


def test_the_repository_holds_markdown_of_every_kind():
    names = {p.as_posix() for p in PAGES}
    assert {"README.md", "README_cn.md", "docs/own_model.md", "examples/resnet18/README.md",
            "pipeline/Step4/README.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.as_posix())
def test_every_link_leads_somewhere(page):
    assert broken(page) == []


def test_the_check_finds_a_missing_file_a_missing_anchor_and_a_generated_file(tmp_path, monkeypatch):
    """The planted bugs: a link to a page that is not there (examples/resnet18's old `docs/cpus.md` read from the
    top), to a heading no page has, to a file a run writes but the repository does not hold."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "pipeline" / "Step4").mkdir(parents=True)
    (tmp_path / "pipeline" / "Step4" / "README.md").write_text("# Step 4\n\n## When gradients differ: the table\n")
    (tmp_path / "README.md").write_text(
        "[ok](pipeline/Step4/README.md#when-gradients-differ-the-table) [ok](#a-heading) `[code](nowhere.md)`\n"
        "[gone](docs/cpus.md) [gone](pipeline/Step4/README.md#the-table) [gone](pipeline/Step4/grads.npy)\n"
        "```\n[code](nowhere.md)\n```\n## A heading\n")
    held = {Path("README.md"), Path("pipeline/Step4/README.md"), Path("pipeline/Step4"), Path("pipeline")}
    monkeypatch.setattr(sys.modules[__name__], "HELD", held)
    found = broken(Path("README.md"))
    assert len(found) == 3, found
    assert "docs/cpus.md" in found[0] and "names no heading" in found[1] and "grads.npy" in found[2]


def test_github_anchors():
    assert slug("Reference run: the committed `log_reprod/`") == "reference-run-the-committed-log_reprod"
    assert slug("Step 1: forward") == "step-1-forward"
    assert slug("第一步：前向 (forward)") == "第一步前向-forward"


# A repository path a requirements file's comments name: under one of the project's folders
NAMED = re.compile(r"(?<![\w./-])((?:bert_sst2|docs|examples|lib|models|pipeline|tests|tools)/[\w./-]*[\w/])")


def unheld(text: str, held=None) -> list:
    """Each repository path the comments of a requirements file name that the repository does not hold."""
    held = HELD if held is None else held
    named = [m.group(1) for line in text.splitlines() if line.lstrip().startswith("#") for m in NAMED.finditer(line)]
    return [p for p in named if Path(p.rstrip("/")) not in held]


@pytest.mark.parametrize("name", sorted(f.name for f in HELD if f.parent == Path(".") and f.name.startswith(
    "requirements") and f.suffix == ".txt"))
def test_a_requirements_file_names_only_files_the_repository_holds(name):
    assert unheld((ROOT / name).read_text(encoding="utf-8")) == []


def test_the_requirements_check_sees_a_file_that_moved():
    held = {Path("tests/formers"), Path("tools/zoo/torchvision_cpu.py")}
    text = ("# its tests are tests/formers/ (skipped where it is not importable)\n"
            "# stand-ins (tools/formers_standins.py); torchvision through tools/zoo/torchvision_cpu.py\n"
            "paddleformers==1.2.0  # not a comment: tools/never_read.py\n")
    assert unheld(text, held) == ["tools/formers_standins.py"]
