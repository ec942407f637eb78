"""torchvision's models against paddle.vision's, as a vision user ports them: converted with no map, compared with
torchvision's in-place ReLUs as they are. The whole set (twelve models, their plants, Step 4) is the zoo's
(tools/zoo/cases.py TORCHVISION, docs/zoo.md); here ResNet-18 at 64 x 64, Step 1: its in-place ReLUs, a ReLU planted
as LeakyReLU behind one, and one BatchNorm's epsilon."""
import pytest

pytest.importorskip("paddle")

from tools.zoo import cases, run  # noqa: E402 (after the skip)
from tools.zoo.torchvision_cpu import import_torchvision  # noqa: E402

try:
    import_torchvision()
except ImportError:
    pytest.skip("torchvision is not installed (requirements.txt pins it)", allow_module_level=True)

SMALL = [dict(case, steps=(1,)) for case in cases.TORCHVISION if case["model"] == "torchvision resnet18"]


def test_torchvision_imports_beside_cpu_torch_and_its_registration_functions_are_torchs_again():
    import torch.library
    tv = import_torchvision()
    assert tv.models.resnet18(num_classes=3) is not None
    assert torch.library.register_fake.__module__ == "torch.library"


@pytest.mark.parametrize("case, plant", [(c, p) for c in SMALL for p in run.runs(c) if p is None or
                                         "step" not in p or 1 in ((p["step"],) if isinstance(p["step"], int)
                                                                  else p["step"])],
                         ids=lambda v: v["name"] if isinstance(v, dict) else "correct port")
def test_a_torchvision_pair_is_green_and_each_plant_red_at_its_module(case, plant):
    if plant is not None:
        plant = {**plant, "step": 1}
    judgements, error = run.run_one(case, plant)
    result = run.outcome(case, plant, judgements, error)
    assert result["got"] == "ok", f"{result['got']}: expected {run.expected(case, plant)}; {run.said(result)}"
