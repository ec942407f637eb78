"""Put first on PYTHONPATH by `python -m portcheck run`: the recorder installed before the user's script runs.

Only when the run's settings are in the environment (the recorder takes them out once installed, so a process the
script starts runs as it is); a sitecustomize of the interpreter's own, which this one shadows, is run in every one."""
import importlib.machinery  # not loaded yet in a venv whose site runs no .pth file that loads it
import importlib.util
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
if spec is not None:  # the interpreter's own sitecustomize
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
if os.environ.get("PORTCHECK_RUN"):
    from portcheck import recorder
    recorder.install()
