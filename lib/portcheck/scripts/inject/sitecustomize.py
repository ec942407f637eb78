"""Put first on PYTHONPATH by `python -m portcheck run`: the recorder installed before the user's script runs.

Only when the run's settings are in the environment; a sitecustomize of the interpreter's own is still run."""
import os

if os.environ.get("PORTCHECK_RUN"):
    import importlib.machinery  # not loaded yet in a venv whose site runs no .pth file that loads it
    import importlib.util
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None:  # the interpreter's own sitecustomize, which this one shadows
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    from portcheck.scripts import install
    install.install()
