"""The docs site builds with `mkdocs build --strict` (what CI runs), and a broken link fails it: to a page, to an
anchor, to a file of the repository outside docs/ (tools/mkdocs_hooks.py). The READMEs stay short: the rest is in
the docs, which the README lists."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from bert_sst2 import paths

ROOT = paths.ROOT
pytest.importorskip("mkdocs")


def build(root, site):
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                           "-d", str(site)], capture_output=True, text=True, cwd=root)


def copy(tmp_path):
    """The docs, mkdocs.yml and its hook copied; the rest of the repository linked in, as it is."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", root)
    shutil.copytree(ROOT / "docs", root / "docs")
    (root / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "mkdocs_hooks.py", root / "tools")
    for entry in ROOT.iterdir():
        if not (root / entry.name).exists() and not entry.name.startswith("."):
            os.symlink(entry, root / entry.name)
    return root


def test_the_docs_site_builds_strictly(tmp_path):
    proc = build(ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for page in ("index", "own_model", "own_model_cn", "causes", "review"):
        assert (tmp_path / "site" / f"{page}.html").is_file(), page
    html = (tmp_path / "site" / "own_model.html").read_text(encoding="utf-8")
    assert "planted_forward.png" in html and "cdnjs" not in html  # the picture; nothing fetched from the web
    api = (tmp_path / "site" / "api.html").read_text(encoding="utf-8")  # generated from the docstrings
    assert "One side of the guide" in api and "Set paddle_model" in api and "cdnjs" not in api


@pytest.fixture(scope="module")
def copy_builds(tmp_path_factory):
    """A copy() builds green (once: each plant's copy is made alike), so a plant's red build is its link's."""
    tmp = tmp_path_factory.mktemp("clean")
    proc = build(copy(tmp), tmp / "site")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("link, says", [("[gone](no_such_page.md)", "no_such_page.md"),
                                        ("[gone](own_model.md#no-such-heading)", "no-such-heading"),
                                        ("[gone](../pipeline/no_such_script.py)", "no_such_script.py")])
def test_a_broken_link_fails_the_build(copy_builds, tmp_path, link, says):
    root = copy(tmp_path)
    page = root / "docs" / "causes.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\nSee {link}.\n", encoding="utf-8")
    proc = build(root, tmp_path / "site")
    assert proc.returncode != 0 and says in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_the_readmes_are_short_and_list_every_page_and_its_build_command():
    pages = sorted(p.stem for p in (ROOT / "docs").glob("*_cn.md") if p.stem != "index_cn")  # index: the site's home
    for name, link in (("README.md", lambda page: f"docs/{page[:-3]}.md"), ("README_cn.md", "docs/{}.md".format)):
        text = (ROOT / name).read_text(encoding="utf-8")
        # the guide's five steps with their commands and the library's ten lines on the first screens, then links
        assert len(text.splitlines()) < 160, name
        assert text.index("| 1 ") < text.index("```python") < 6000, name
        for page in pages:  # each README links its own language's page
            assert link(page) in text, (name, page)
        assert "mkdocs serve" in text
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in pages:
        assert re.search(rf": {page}\.md$", nav, re.M) and re.search(rf": {page[:-3]}\.md$", nav, re.M), page


def test_mkdocs_is_pinned_with_what_it_pulls_in():
    pins = (ROOT / "requirements.txt").read_text()
    for package in ("mkdocs", "Markdown", "mergedeep", "mkdocs-get-deps", "pathspec", "platformdirs", "pyyaml_env_tag",
                    "watchdog", "ghp-import", "mkdocstrings", "mkdocstrings-python", "mkdocs-autorefs", "griffelib",
                    "pymdown-extensions"):
        assert re.search(rf"^{re.escape(package)}==\S+$", pins, re.M | re.I), package


def test_each_common_cause_names_bugs_its_tests_plant():
    """docs/causes.md: every planted bug a row names (`name`) is planted in a test file the same row links."""
    rows = [r for r in (ROOT / "docs" / "causes.md").read_text().splitlines() if r.startswith("| ") and "tests/" in r]
    assert len(rows) >= 12
    for row in rows:
        where = row.strip("|").split("|")[-1]
        files = re.findall(r"\(\.\./(tests/[\w.]+)\)", where)
        text = "".join((ROOT / f).read_text() for f in files)
        assert files, row
        for name in re.findall(r"`([a-z0-9_]+)`", where):
            assert f'"{name}"' in text, f"{name} is not planted in {', '.join(files)}"
