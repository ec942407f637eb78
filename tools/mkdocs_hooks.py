"""MkDocs hook (mkdocs.yml's `hooks`): a docs page's link to a file of the repository outside docs/ (a step's
README, a script, a test) is checked as strictly as mkdocs checks the links between pages: a target that is not
there fails the build, naming the page and the link. The site holds the pages only, so such a link is shown as the
file's path (and its text), never as a link that would lead nowhere."""
import os
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\(([^)\s]+)\)")
FENCE = re.compile(r"^( *)```.*?^\1```", re.M | re.S)


def on_page_markdown(markdown, page, config, files):
    docs = Path(os.path.normpath(config["docs_dir"]))  # paths as written, links in them not followed
    root = docs.parent
    here = Path(os.path.normpath(page.file.abs_src_path)).parent

    def outside(match):
        text, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return match.group(0)  # a web address, or an anchor of this page: mkdocs' own checks
        path = Path(os.path.normpath(here / target.split("#", 1)[0]))
        if path == docs or docs in path.parents:
            return match.group(0)  # a page or a file of the docs: mkdocs checks it
        if root not in path.parents or not path.exists():
            raise PluginError(f"{page.file.src_path}: the link [{text}]({target}) leads to no file of the repository")
        shown = f"`{path.relative_to(root).as_posix()}`"
        return shown if text.strip("`") in (shown.strip("`"), path.name) else f"{text} ({shown})"

    # code blocks are not links
    parts, last = [], 0
    for block in FENCE.finditer(markdown):
        parts += [LINK.sub(outside, markdown[last:block.start()]), block.group(0)]
        last = block.end()
    return "".join(parts + [LINK.sub(outside, markdown[last:])])


if __name__ == "__main__":
    import argparse
    import sys
    argparse.ArgumentParser(description="A MkDocs hook, not a command: mkdocs.yml names it, and `mkdocs build "
                            "--strict` (or `mkdocs serve`) runs it on every page.").parse_args()
    print("tools/mkdocs_hooks.py is run by mkdocs: run `mkdocs build --strict` or `mkdocs serve` from the repository",
          file=sys.stderr)
    sys.exit(2)
