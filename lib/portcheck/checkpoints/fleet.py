"""Stand-ins for paddlefleet's two modules, which are not on PyPI, so that paddleformers' base models import.

paddleformers 1.2.0's qwen2, qwen3, qwen2_moe, qwen3_moe, qwen3_next, deepseek_v3 and glm4_moe modeling modules import `paddlefleet_ops` (through paddleformers/transformers/fused_a2a.py) or
`paddleformers.transformers.gpt_provider` (which raises without `paddlefleet`) at load. Their base `XModel` is plain
Paddle once those imports are satisfied; their `XForCausalLM` builds paddlefleet's own GPTModel and cannot be built.
minimax_m2's imports paddlefleet itself (`paddlefleet.transformer.utils`): it cannot be built from PyPI.

    from portcheck.checkpoints import fleet
    fleet.prepare()   # before the first import of paddleformers or transformers
    from paddleformers.transformers.qwen3.modeling import Qwen3Model

install() fills only what is missing and returns NOTICE, the one line a run says about it; an installed paddlefleet
is left alone. prepare() also imports in the one order that works: torch first (paddleformers otherwise hides torch
from transformers), then paddleformers before transformers (paddlecodec, which paddleformers installs, puts a
`torchcodec` package without its metadata beside it; transformers 5.3's models then fail to import reading its
version, and paddleformers' import sets `sys.modules["torchcodec"] = None`).
"""
import importlib.util
import sys
import types

NOTICE = ("paddlefleet and paddlefleet_ops are not on PyPI: stand-ins for paddlefleet_ops (no DeepEP) and "
          "gpt_provider.GPTModelProvider let the base models import; XForCausalLM needs the real paddlefleet")
PROVIDER = "paddleformers.transformers.gpt_provider"


class GPTModelProvider:
    """Placeholder base of paddleformers' `XModelProvider` dataclasses, which build paddlefleet's GPTModel (never
    called here); glm4_moe's reads its transform_rules while its class is defined."""
    transform_rules: dict = {}


def _fleet_ops() -> types.ModuleType:
    module = types.ModuleType("paddlefleet_ops")
    module.__doc__ = "stand-in (portcheck.checkpoints.fleet): no DeepEP kernels"
    module.is_deep_ep_available = lambda: False
    return module


def _provider() -> types.ModuleType:
    module = types.ModuleType(PROVIDER)
    module.__doc__ = "stand-in (portcheck.checkpoints.fleet): paddlefleet's GPT provider, never built"
    module.GPTModelProvider = GPTModelProvider
    return module


def needed() -> bool:
    """Whether paddlefleet is missing here (the stand-ins are then what lets its importers load)."""
    return importlib.util.find_spec("paddlefleet") is None


def install() -> str:
    """Put the stand-ins into sys.modules where paddlefleet is missing; NOTICE if they were put, else ''."""
    if not needed():
        return ""
    # a stand-in already put has no spec, which find_spec refuses
    if "paddlefleet_ops" not in sys.modules and importlib.util.find_spec("paddlefleet_ops") is None:
        sys.modules.setdefault("paddlefleet_ops", _fleet_ops())
    sys.modules.setdefault(PROVIDER, _provider())
    return NOTICE


def prepare() -> str:
    """torch, the stand-ins (install()), then paddleformers: what a process needs before it imports a paddleformers
    or a transformers model here; NOTICE if the stand-ins were put, else ''."""
    import torch  # noqa: F401
    notice = install()
    import paddleformers  # noqa: F401
    return notice
