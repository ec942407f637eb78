"""A process that has imported one framework and forks a child for each script the tests run on that framework's
side (conftest.run; PORTCHECK_TESTS_FORK=0: none): the child is the script's own process, as `python script.py args`
would be, without the second or two of importing torch or Paddle again each time (a tiny model's forward: 2.4 s of
CPU as a process, 0.1 s forked; the same bytes written).

    python tests/forkserver.py torch|paddle     # then, on stdin, one JSON request a line: argv, cwd, home, out, err

Each request's child runs argv[0] as __main__ with sys.argv = argv, BERT_ALIGN_HOME = home, in cwd, its stdout and
stderr to the files out and err; the answer, on stdout, is its exit status as subprocess gives it (-9: killed by
SIGKILL). Only the framework is imported before the fork, under the server's environment, which is the one
conftest.run gives a script: a run asking for another environment is a process of its own.
"""
import atexit
import importlib
import json
import os
import runpy
import sys
import traceback

import portcheck.runtime  # noqa: F401  (what each script imports first)


def child(request):
    """The script's process: never returns."""
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ["BERT_ALIGN_HOME"] = request["home"]
        for fd, path in ((1, request["out"]), (2, request["err"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # as `python script.py` sets it
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
            code = 0
        except SystemExit as e:
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            sys.excepthook(*sys.exc_info())
            code = 1
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def main():
    importlib.import_module(sys.argv[1])
    sys.argv = sys.argv[:1]
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            child(json.loads(line))
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    main()
