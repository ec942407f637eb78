"""A process that has imported one framework and forks a child for each script the tests run on that framework's
side (conftest.run; PORTCHECK_TESTS_FORK=0: none): the child is the script's own process, as `python script.py args`
would be, without the second or two of importing torch or Paddle again each time (a tiny model's forward: 2.4 s of
CPU as a process, 0.1 s forked; the same bytes written).

    python tests/forkserver.py [--bare] torch|paddle [FILE | --import=MODULE ...]
    # then on stdin a JSON request a line: argv, cwd, env, out, err (session, site: `portcheck run`'s scripts)

FILE: a module of the project whose third-party imports are made before the fork too (bert_sst2/twins/pt_data.py:
datasets and transformers' tokenizer, for the scripts that read data); the project's own modules never are, as a
plant (tests/plant.py) patches them before the script imports them.

Each request's child runs argv[0] as __main__ with sys.argv = argv, env set (None: unset), in cwd, its stdout and
stderr to the files out and err; the answer, on stdout, is its exit status as subprocess gives it (-9: killed by
SIGKILL). Only the framework is imported before the fork, under the server's environment, which is the one
conftest.run gives a script: a run asking for another environment is a process of its own.
"""
import ast
import atexit
import contextlib
import importlib
import json
import os
import runpy
import signal
import sys
import traceback
from pathlib import Path


def child(request):
    """The script's process: never returns."""
    code = 1
    try:
        if request.get("session"):  # `portcheck run`'s script: a session of its own (launch.script), the group ended
            os.setsid()
        os.chdir(request["cwd"])
        for key, value in request["env"].items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for fd, path in ((1, request["out"]), (2, request["err"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # as `python script.py` sets it
        try:
            if request.get("site"):  # what the interpreter's start-up runs: portcheck run's injected sitecustomize
                runpy.run_path(request["site"], run_name="sitecustomize")
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


PROJECT = ("bert_sst2", "models", "portcheck", "examples")
# what torch imports at a script's first optimizer (torch.optim's step wrappers import it lazily): 1.5 s of CPU
LATER = {"torch": ["torch._dynamo"]}


def third_party_imports(path) -> str:
    """A file's module-level import statements, less the project's own."""
    def project(node):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        return any(name.split(".")[0] in PROJECT for name in names)
    return ast.unparse(ast.Module([node for node in ast.parse(Path(path).read_text()).body
                                   if isinstance(node, (ast.Import, ast.ImportFrom)) and not project(node)], []))


def main():
    if sys.argv[1] == "--bare":  # a user's script (portcheck run's): its process as `python script.py` starts it
        del sys.argv[1]
    else:
        importlib.import_module("portcheck.core.runtime")  # what each of the project's scripts imports first
    for module in [sys.argv[1], *LATER.get(sys.argv[1], [])]:
        importlib.import_module(module)
    for path in sys.argv[2:]:
        if path.startswith("--import="):
            importlib.import_module(path.split("=", 1)[1])
        else:
            exec(third_party_imports(path), {})
    sys.argv = sys.argv[:1]
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            child(json.loads(line))
        _, status = os.waitpid(pid, 0)
        with contextlib.suppress(ProcessLookupError, PermissionError):  # what a session's script left (launch.script)
            os.killpg(pid, signal.SIGKILL)
        print(os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    main()
