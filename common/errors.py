"""How a script fails: a PipelineError is something the user can fix, reported as one line, exit 2."""
import sys
from pathlib import Path


class PipelineError(Exception):
    """A problem the user can fix; reported as one line, never a traceback."""


def fail(msg: str, code: int = 2):
    # one line whatever the message carries (a path or a value with a newline could forge another)
    print("error: " + "".join(c if c.isprintable() else repr(c)[1:-1] for c in msg), file=sys.stderr)
    sys.exit(code)


def require(path, how: str) -> Path:
    """Stop with one line naming the missing file and the command that makes it."""
    if not Path(path).is_file():
        raise PipelineError(f"{path} not found: run `{how}` first")
    return Path(path)


def run_main(main):
    """Run a script's main(); a PipelineError ends in one line and exit code 2."""
    try:
        return main()
    except PipelineError as e:
        fail(str(e))
