"""How a script fails: a PipelineError is something the user can fix, reported as one line, exit 2;
Ctrl-C is one line too, exit 130 (the shell's code for a SIGINT)."""
import contextlib
import errno
import os
import sys
from pathlib import Path

INTERRUPTED = 130
STDOUT_GONE = 141  # the shell's code for a process a closed pipe stopped (128 + SIGPIPE)


class PipelineError(Exception):
    """A problem the user can fix; reported as one line, never a traceback."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what the interrupted script knows about where it stopped; exit 130. A KeyboardInterrupt, not an
    Exception: a SIGINT handler raises it wherever the script is, and library code's `except Exception` there
    (transformers' tokenizer turning any error into a ValueError) must not take it for an error of its own."""


def one_line(message: str) -> str:
    """A message as one line that says what it holds: a newline or other control character, a bidirectional override
    or isolate, a line or paragraph separator, a byte that was not UTF-8 (a surrogate escape) in a name, a record or a
    file's text is escaped, so nothing can forge a line of a log or reorder a verdict as it is shown. A leading tab is
    reprod_log's indent."""
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in str(message))


def fail(msg: str, code: int = 2):
    msg = one_line(msg)
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(code)


def remedy(how: str, when: str = "first") -> str:
    """`how` is a command ("python ...", said as "run `...` first/again") or already a sentence of advice."""
    return f"run `{how}` {when}" if how.startswith("python ") else how


def require(path, how: str) -> Path:
    """Stop with one line naming the missing file and what makes it."""
    path = Path(path)
    if path.is_dir():
        raise PipelineError(f"{path} is a folder, not a file: {remedy(how)} [PC001]")
    if not path.is_file():
        raise PipelineError(f"{path} not found: {remedy(how)} [PC002]")
    return path


def first_line(e: BaseException, limit: int = 200) -> str:
    """An exception as `Type: its first non-empty line` (some, like EOFError, carry no message)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0][:limit]}" if lines else type(e).__name__


@contextlib.contextmanager
def raised_by(where: str, hint: str = ""):
    """Run the user's own code (a model's forward, a loss, an optimizer factory, a name map): whatever it raises
    becomes one line saying where it came from, with its own first line, and `hint` (what to check)."""
    try:
        yield
    except PipelineError:
        raise
    except Exception as e:  # noqa: BLE001 - any error of the user's code, said in one line; Ctrl-C passes
        raise PipelineError(f"{where}: {first_line(e)}" + (f"; {hint}" if hint else "") + " [PC229]") from None


def run_main(main):
    """Run a script's main(); a PipelineError ends in one line and exit code 2, Ctrl-C in one line and 130, and
    a stdout that is gone (a reader that stopped reading: `| head`) or full (/dev/full) ends quietly, STDOUT_GONE."""
    for stream in (sys.stdout, sys.stderr):  # a Chinese key on a console that cannot show it: escaped, not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        try:
            return main()
        finally:
            sys.stdout.flush()  # a closed or full stdout shows here, not as a traceback at exit
    except (BrokenPipeError, ConnectionResetError):
        _stdout_gone("")
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO) or e.filename is not None:
            raise  # a named file's error (the library's own writes raise PipelineErrors)
        _stdout_gone(f"error: stdout could not be written ({e.strerror}) [PC006]")
    except Interrupted as e:
        fail(str(e), INTERRUPTED)
    except PipelineError as e:
        fail(str(e))
    except KeyboardInterrupt:
        fail("interrupted (Ctrl-C); files already written are complete, run the command again [PC003]", INTERRUPTED)


def _stdout_gone(message: str):
    """Exit STDOUT_GONE with at most one line on stderr; stdout pointed at /dev/null, so that the interpreter's
    own flush at exit finds nothing to fail on."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    if message:
        print(message, file=sys.stderr)
    sys.exit(STDOUT_GONE)
