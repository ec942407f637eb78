"""The PaddleFormers environment's tests (requirements-formers.txt, its venv .venv-formers): paddleformers 1.2.0
beside transformers 5. Where paddleformers is not importable (the project's main venv) the whole folder is skipped
with one reason; where it is, paddlefleet's two modules, not on PyPI, are stood in for (portcheck.checkpoints.fleet)
and the run's header says so in one line.
"""
import importlib.util

import pytest

if importlib.util.find_spec("paddleformers") is None:
    pytest.skip("paddleformers is not installed here: tests/formers/ runs in the PaddleFormers venv "
                "(.venv-formers, requirements-formers.txt)", allow_module_level=True)

from portcheck.checkpoints import fleet as formers_standins  # noqa: E402

NOTICE = formers_standins.prepare()  # torch, the stand-ins, paddleformers: before any test imports transformers


def pytest_report_header(config):
    return [f"tests/formers: {NOTICE}"] if NOTICE else []
