"""The frameworks' import-time notices that say nothing about the user's run, silenced by their exact message.

Entry scripts silence them for the whole process (portcheck.core.runtime); the `python -m portcheck` command only
around its own imports of the frameworks (quiet_imports), so a refusal is its one line. Neither touches the
environment the scripts `portcheck run` starts are handed.
"""
import contextlib
import logging
import sys
import warnings

# paddle's missing-ccache warning (a C++ build cache; nothing here compiles C++), setuptools' distutils warning
QUIET_WARNINGS = ("No ccache found", "Setuptools is replacing distutils")
# paddle print()s these two lines at import whenever OMP_NUM_THREADS asks for more than one thread
QUIET_STDERR = ("WARNING: OMP_NUM_THREADS set to ", "PLEASE USE OMP_NUM_THREADS WISELY.")
# datasets (paddlenlp imports it) logs, at INFO, the torch it found
QUIET_LOGS = {"datasets": ("PyTorch version ",)}


class QuietStderr:
    """sys.stderr without the lines that start with QUIET_STDERR (Paddle print()s them: no warnings
    filter reaches them). print() writes the text and its newline separately; both are dropped."""

    def __init__(self, stream):
        self._stream = stream
        self._dropped = False

    def write(self, text):
        dropped, self._dropped = self._dropped, False
        if text.startswith(QUIET_STDERR):
            self._dropped = True
            return len(text)
        if dropped and text == "\n":
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _Dropped(logging.Filter):
    def __init__(self, starts: tuple):
        super().__init__()
        self.starts = starts

    def filter(self, record) -> bool:
        return not str(record.msg).startswith(self.starts)


@contextlib.contextmanager
def quiet_imports():
    """Within: QUIET_WARNINGS, QUIET_STDERR's lines and QUIET_LOGS' records dropped; every other warning, line and
    record as it was."""
    filters = [(logging.getLogger(name), _Dropped(starts)) for name, starts in QUIET_LOGS.items()]
    stderr = sys.stderr
    if stderr is not None and not isinstance(stderr, QuietStderr):
        sys.stderr = QuietStderr(stderr)
    with warnings.catch_warnings():
        for message in QUIET_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        for logger, dropped in filters:
            logger.addFilter(dropped)
        try:
            yield
        finally:
            for logger, dropped in filters:
                logger.removeFilter(dropped)
            sys.stderr = stderr
