"""A torch container's own tables held by the port's model itself (tests/ports/vit.py): transformers' ViT keeps the
class token and position table in `embeddings`, a PaddleClas-style port on the model; transformers' CLIP vision tower
keeps class_embedding in `embeddings`, paddlenlp's habit on the tower. convert refused both ("1 torch module(s) have no
counterpart in the Paddle model: embeddings"), with no map and with the list map sending `embeddings` to the model
itself ([("^embeddings$", "(model)")]), which a dict map's "(model)" had stopped from pairing. With no map each
table now pairs tensor to tensor, by its name, else by the one free parameter of its shape (as a pooler's Linear
against bare parameters, mapping.loose); the list map pairs the container with the model again."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert  # noqa: E402
from ports import vit  # noqa: E402

X = vit.PIXELS
TOWERS = {"ViT": (vit.ViTForImageClassification, vit.PortOfViT, {"embeddings.cls_token": "cls_token",
                                                                "embeddings.position_embeddings": "pos_embed"}),
          "CLIP": (vit.CLIPVisionTransformer, vit.PortCLIPVision, {"embeddings.class_embedding": "class_embedding"})}


def pair(tower, plant=None, **kw):
    torch_kind, paddle_kind, _ = TOWERS[tower]
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = torch_kind().eval(), paddle_kind(plant)
    convert(pt, pd, inputs=X, **kw)
    return pt, pd.eval()


def loss(o, t):
    return (o[0] ** 2).mean() + (o[1] ** 2).mean() if isinstance(o, tuple) else (o ** 2).mean()


@pytest.mark.parametrize("tower", list(TOWERS))
def test_a_containers_tables_on_the_ports_model_pair_with_no_map_forward_and_backward(tower):
    pt, pd = pair(tower)
    state = dict(pt.named_parameters())
    for torch_key, paddle_key in TOWERS[tower][2].items():
        np.testing.assert_array_equal(pd.state_dict()[paddle_key].numpy(), state[torch_key].detach().numpy())
    report = compare_forward(pt, pd, X, isolate=True)
    assert report.passed, report.table()
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    backward = compare_backward(pt.train(), pd.train(), X, np.zeros(1, "float32"), loss=(loss, loss), optimizer=sgd,
                                steps=2)
    assert backward.passed, backward.table()
    assert {f"grad {k}" for k in TOWERS[tower][2]} <= {r.name for r in backward.grads}, backward.table()


@pytest.mark.parametrize("tower, plant, cumulative, isolated", [
    ("ViT", "cls", "(model)", "(model) (before encoder.layer.0)"),
    ("ViT", "softmax", "encoder.layer.0.attention", "encoder.layer.0.attention"),
    ("CLIP", "class", "(model)[0]", "(model) (before pre_layrnorm)"),
    ("CLIP", "gelu", "encoder.layers.0", "encoder.layers.0")])
def test_a_plant_in_such_a_port_is_red_where_it_is(tower, plant, cumulative, isolated):
    """The class token added where the port's model computes the embeddings (torch's `embeddings` computes them):
    the model's own forward; the rest at their modules."""
    pt, pd = pair(tower, plant)
    report = compare_forward(pt, pd, X)
    assert not report.passed and report.first_diverging == cumulative, report.table()
    report = compare_forward(pt, pd, X, isolate=True)
    assert not report.passed and report.first_diverging == isolated, report.table()


def test_the_list_maps_model_entry_pairs_the_container_with_the_model_again():
    """[("^embeddings$", "(model)")], a regex rule sending torch's embeddings to the Paddle model itself: the
    container pairs with it (a dict map's {"model": "(model)"} still makes a wrapper's modules the model's, the
    wrapper left to the alignment: tests/test_root_own.py)."""
    name_map = [("^embeddings$", "(model)")]
    pt, pd = pair("ViT", name_map=name_map, layouts={"ViTEmbeddings": "same"})
    report = compare_forward(pt, pd, X, name_map=name_map)
    assert report.passed and report.pairing.pairs["embeddings"] == "(model)", report.pairs()
    report = compare_forward(*pair("ViT", "softmax", name_map=name_map, layouts={"ViTEmbeddings": "same"}), X,
                             name_map=name_map)
    assert not report.passed and report.first_diverging == "encoder.layer.0.attention", report.table()
