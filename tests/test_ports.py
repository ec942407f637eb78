"""The corpus of hand-written ports a change to the pairing or the layouts is run against before it lands: every port
in tests/ports (PaConvert's output, a PaddleClas-style ViT, ports holding tables on another level than torch's, an
LSTM fed a packed batch on one side and sequence_length= on the other) and the hand-written pairs of other tests,
each converted with no name map (layouts= only where a torch type of its own holds a table, as the docs say), the
correct port green and each plant red at its module. Tiny configs: the whole corpus runs in seconds."""
from dataclasses import dataclass, field

import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_forward, convert  # noqa: E402
from ports import own_linear, paconvert, rnn, vit  # noqa: E402
import test_loose_forms  # noqa: E402
import test_pooler_linear  # noqa: E402
import test_root_own  # noqa: E402
import test_vision_ports  # noqa: E402


@dataclass
class Port:
    """torch(): the torch model; paddle(plant): its port, plant None for the correct one; plants: {plant: the
    module report.first_diverging names}; isolated: the same, with isolate=True, where it names another place."""
    torch: object
    paddle: object
    inputs: object
    plants: dict
    layouts: dict = None
    isolated: dict = field(default_factory=dict)


def _in_place(**kw):
    return test_vision_ports.net(paddle, test_vision_ports.PaddleBlock(**kw))


def _pooler(plant=None):
    return test_pooler_linear.Port(paddle.nn.functional.relu if plant else paddle.tanh)


def _loose(build, *args):
    """test_loose_forms' forms: one build makes both sides, each with its plant or none."""
    return (lambda: test_loose_forms.models(build(*args))[0],
            lambda plant=None: test_loose_forms.models(build(*args, plant=bool(plant)))[1])


PORTS = {
    "timm ViT, PaddleClas's port (tables on the model)": Port(
        vit.VisionTransformer, lambda plant=None: vit.PaddleClasViT(plant), vit.PIXELS,
        {"scale": "blocks.0.attn", "eps": "blocks.1.norm1"},
        layouts={"VisionTransformer": "same"}),
    "timm ViT, PaConvert's output (paddle.compat.nn.Linear)": Port(
        vit.VisionTransformer, lambda plant=None: vit.PaConvertViT(plant), vit.PIXELS,
        {"kq": "blocks.0.attn", "tanh": "blocks.0.mlp.act"}, layouts={"VisionTransformer": "same"}),
    "transformers' ViT, its tables on the port's model": Port(
        vit.ViTForImageClassification, lambda plant=None: vit.PortOfViT(plant), vit.PIXELS,
        {"cls": "(model)", "softmax": "encoder.layer.0.attention"}),
    "transformers' CLIP vision tower, class_embedding on the port's tower": Port(
        vit.CLIPVisionTransformer, lambda plant=None: vit.PortCLIPVision(plant), vit.PIXELS,
        {"class": "(model)[0]", "gelu": "encoder.layers.0"}),
    "PaConvert's output beside Conv2D and LayerNorm": Port(
        paconvert.SmallNet, lambda plant=None: paconvert.PaConvertSmallNet(plant=plant), paconvert.IMAGES,
        {"reflect": "conv", "sigmoid": "(model) (before head)"}),
    "PaConvert's Linears beside a classic paddle.nn.Linear": Port(
        paconvert.MixedNet, lambda plant=None: paconvert.PaConvertMixedNet(plant), paconvert.FEATURES,
        {"body": "(model) (before head)"}),
    "PaConvert's square Linears only": Port(
        paconvert.SquareMLP, lambda plant=None: paconvert.PaConvertSquareMLP(plant=plant), paconvert.FEATURES,
        {"transposed": "layers.1"}),
    "a port's own Linear holding torch's layout, square": Port(
        paconvert.SquareMLP, lambda plant=None: own_linear.OwnLinearMLP(plant=plant), paconvert.FEATURES,
        {"relu": "(model) (before layers.2)"}),
    "an LSTM classifier, packed against sequence_length=": Port(
        rnn.LSTMClassifier, lambda plant=None: rnn.PortLSTMClassifier(plant), rnn.BATCH,
        {"lengths": "rnn[0]", "forward": "(model) (before fc)"}),
    "torchvision's in-place activations (test_vision_ports)": Port(
        lambda: test_vision_ports.net(torch, test_vision_ports.TorchBlock()),
        lambda plant=None: _in_place(**({"act": paddle.nn.ReLU} if plant else {})), test_vision_ports.X,
        {"relu": "1.act"}),
    "a container against a Linear of its name (test_pooler_linear)": Port(
        test_pooler_linear.Torch, _pooler, test_pooler_linear.IDS, {"relu": "(model)[1]"}),
    "the model's own table and scale (test_root_own)": Port(
        test_root_own.Shifted, lambda plant=None: test_root_own.PaddleShifted(1.5 if plant else 1.0),
        test_root_own.IDS, {"shift": "(model)[1]"}, isolated={"shift": "(model) (before norm)"}),
    "a pooler's Linear against bare parameters (test_loose_forms)": Port(
        *_loose(test_loose_forms.pooler), test_loose_forms.X, {"transposed": "part"}),
    "CLIP's projections crossed at the root (test_loose_forms)": Port(
        *_loose(test_loose_forms.clip), test_loose_forms.X, {"exp": "(model)"}),
}


def _judged(port: Port, plant, isolate):
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = port.torch().eval(), port.paddle(plant) if plant else port.paddle()
    convert(pt, pd, inputs=port.inputs, layouts=port.layouts)
    return compare_forward(pt, pd.eval(), port.inputs, isolate=isolate)


@pytest.mark.parametrize("name", list(PORTS))
def test_each_correct_port_is_green_with_no_map_and_each_plant_red_at_its_module(name):
    port = PORTS[name]
    report = _judged(port, None, isolate=False)
    assert report.passed and report.first_diverging is None, report.table()
    for plant, module in port.plants.items():
        report = _judged(port, plant, isolate=False)
        assert not report.passed and report.first_diverging == module, (plant, report.table())
        if plant in port.isolated:
            report = _judged(port, plant, isolate=True)
            assert not report.passed and report.first_diverging == port.isolated[plant], (plant, report.table())
