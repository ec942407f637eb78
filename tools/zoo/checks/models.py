"""Model pairs (Steps 1 and 4): small configs of library models and paddle.vision's, torch's and Paddle's own
networks, and the habits' pairs (habits.py), each side built from its framework's classes; the check runs
compare_forward cumulative and isolated and, where the case covers Step 4, compare_backward."""
import numpy as np
import paddle
import torch

from portcheck import Fused, compare_backward, compare_forward, convert
from tools.zoo.checks.habits import habit
from tools.zoo.checks.judging import backward_judgements, forward_judgements

# A builder returns (torch model, Paddle model, inputs, layouts): both built from configs, small, offline, the
# Paddle one converted from the torch one (portcheck.convert, no name map) and, where a user must, fixed by hand as
# the port's own code would (a fused projection's column order). A plant is data (cases.py): a Paddle config
# value, an attribute of one Paddle module set, a square weight transposed, two weights swapped.

def _at(model, path):
    for part in path.split("."):
        model = getattr(model, part)
    return model


def plant_paddle(model, plant):
    """The plant's edits of the converted Paddle model, each a one-line porting bug."""
    plant = plant or {}
    for path, attr, value in plant.get("set", ()):
        setattr(_at(model, path), attr, value)
    for path, cls in plant.get("module", ()):  # a module swapped for another framework class
        parent, _, last = path.rpartition(".")
        setattr(_at(model, parent) if parent else model, last, getattr(paddle.nn, cls)())
    if "eps_all" in plant:  # every BatchNorm's epsilon
        for layer in model.sublayers():
            if isinstance(layer, paddle.nn.layer.norm._BatchNormBase):
                layer._epsilon = plant["eps_all"]
    for path in plant.get("transpose", ()):
        w = _at(model, path)
        w.set_value(w.numpy().T.copy())
    for a, b in plant.get("swap", ()):
        wa, wb = _at(model, a), _at(model, b)
        va, vb = wa.numpy(), wb.numpy()
        wa.set_value(vb), wb.set_value(va)
    for path, order in plant.get("gates", ()):  # a recurrent weight's gate blocks in another order
        w = _at(model, path)
        blocks = np.split(w.numpy(), len(order))
        w.set_value(np.concatenate([blocks[i] for i in order]))
    for path, heads in plant.get("qkv_not_per_head", ()):  # a fused q/k/v read per head, filled [q | k | v]
        for w in (_at(model, path).weight, _at(model, path).bias):
            width = w.shape[-1]
            order = np.arange(width).reshape(heads, 3, width // (3 * heads)).transpose(1, 0, 2).reshape(-1)
            w.set_value(w.numpy()[..., order])


def _ids(vocab, shape=(2, 12), seed=0):
    return {"input_ids": np.random.RandomState(seed).randint(1, vocab, shape).astype("int64")}


SIZES = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=64)
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def bert(config):
    from paddlenlp.transformers import BertConfig as PaddleConfig, BertModel as PaddleBert
    from transformers import BertConfig, BertModel
    pt = BertModel(BertConfig(**SIZES, **NO_DROPOUT, attn_implementation="eager"))
    pd = PaddleBert(PaddleConfig(**{**SIZES, **NO_DROPOUT, "type_vocab_size": 2, **config}))
    return pt, pd, _ids(100), None


def distilbert(config):
    from paddlenlp.transformers import DistilBertConfig as PaddleConfig, DistilBertModel as PaddleDistil
    from transformers import DistilBertConfig, DistilBertModel
    sizes = dict(vocab_size=100, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64,
                 dropout=0.0, attention_dropout=0.0)
    pt = DistilBertModel(DistilBertConfig(**sizes, attn_implementation="eager"))
    pd = PaddleDistil(PaddleConfig(**{**SIZES, **NO_DROPOUT, **config}))
    return pt, pd, _ids(100), None


def electra(config):
    from paddlenlp.transformers import ElectraConfig as PaddleConfig, ElectraModel as PaddleElectra
    from transformers import ElectraConfig, ElectraModel
    sizes = {**SIZES, "embedding_size": 16}
    pt = ElectraModel(ElectraConfig(**sizes, **NO_DROPOUT))
    pd = PaddleElectra(PaddleConfig(**{**sizes, **NO_DROPOUT, "type_vocab_size": 2, **config}))
    return pt, pd, _ids(100), None


def roberta(config):
    from paddlenlp.transformers import RobertaConfig as PaddleConfig, RobertaModel as PaddleRoberta
    from transformers import RobertaConfig, RobertaModel
    pt = RobertaModel(RobertaConfig(**SIZES, **NO_DROPOUT, pad_token_id=1, attn_implementation="eager"))
    pd = PaddleRoberta(PaddleConfig(**{**SIZES, **NO_DROPOUT, "pad_token_id": 1, "type_vocab_size": 2, **config}))
    return pt, pd, _ids(100), None


def ernie(config):
    from paddlenlp.transformers import ErnieConfig as PaddleConfig, ErnieModel as PaddleErnie
    from transformers import ErnieConfig, ErnieModel
    pt = ErnieModel(ErnieConfig(**SIZES, **NO_DROPOUT, attn_implementation="eager"))
    pd = PaddleErnie(PaddleConfig(**{**SIZES, **NO_DROPOUT, "type_vocab_size": 2, **config}))
    return pt, pd, _ids(100), None


def albert(config):
    """One layer group shared by both layers, as ALBERT's are; paddlenlp saves a position-id buffer transformers'
    embeddings hold unsaved (convert fills it from torch's)."""
    from paddlenlp.transformers import AlbertConfig as PaddleConfig, AlbertModel as PaddleAlbert
    from transformers import AlbertConfig, AlbertModel
    sizes = {**SIZES, **NO_DROPOUT, "embedding_size": 16, "hidden_act": "gelu_new"}
    pt = AlbertModel(AlbertConfig(**sizes, classifier_dropout_prob=0.0, attn_implementation="eager"))
    pd = PaddleAlbert(PaddleConfig(**{**sizes, "type_vocab_size": 2, **config}))
    return pt, pd, _ids(100), None


def opt(config):
    """transformers hands OPT's learned positions a float32 mask, paddlenlp a bool one (judging.judge_against)."""
    from paddlenlp.transformers import OPTConfig as PaddleConfig, OPTModel as PaddleOPT
    from transformers import OPTConfig, OPTModel
    sizes = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
                 max_position_embeddings=64, dropout=0.0, attention_dropout=0.0, word_embed_proj_dim=32)
    pt = OPTModel(OPTConfig(**sizes, use_cache=False, attn_implementation="eager"))
    pd = PaddleOPT(PaddleConfig(**{**sizes, "intermediate_size": 64, **NO_DROPOUT, **config}))
    return pt, pd, _ids(100), None


def bloom(config):
    from paddlenlp.transformers import BloomConfig as PaddleConfig, BloomModel as PaddleBloom
    from transformers import BloomConfig, BloomModel
    sizes = dict(vocab_size=100, hidden_size=32, n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0,
                 use_cache=False)
    return BloomModel(BloomConfig(**sizes)), PaddleBloom(PaddleConfig(**{**sizes, **config})), _ids(100), None


def llama(config):
    from paddlenlp.transformers import LlamaConfig as PaddleConfig, LlamaForCausalLM as PaddleLlama
    from transformers import LlamaConfig, LlamaForCausalLM
    sizes = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=64, use_cache=False, rms_norm_eps=1e-6)
    pt = LlamaForCausalLM(LlamaConfig(**sizes, attn_implementation="eager"))
    pd = PaddleLlama(PaddleConfig(**{**sizes, **config}))
    return pt, pd, _ids(64), {"LlamaLMHead": "transpose"}


def gpt2(config, fused):
    """transformers' GPT-2 (one Conv1D c_attn, columns [q | k | v]) against paddlenlp's GPT, its q/k/v split or
    fused per head (fuse_attention_qkv)."""
    from paddlenlp.transformers import GPTConfig as PaddleConfig, GPTModel as PaddleGPT
    from transformers import GPT2Config, GPT2Model
    from portcheck.mapping.recipes import paddlenlp_gpt
    pt = GPT2Model(GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64, n_inner=64,
                              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager",
                              use_cache=False))  # paddlenlp returns no cache: the port compares the hidden states
    pd = PaddleGPT(PaddleConfig(**{**SIZES, **NO_DROPOUT, "fuse_attention_qkv": fused, "type_vocab_size": 0,
                                   **config}))
    return pt, pd, _ids(100), paddlenlp_gpt(heads=pt.config.n_head, fused=fused)  # the recipe, as a user passes it


def vision_resnet(config):
    from examples.resnet18 import resnet as example
    pt = example.new_torch_model()
    pd = paddle.vision.models.resnet18(num_classes=example.CLASSES)
    return pt, pd, example.random_batch(2)[0], None


def mobilenet_v2(config):
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification
    pt = MobileNetV2ForImageClassification(MobileNetV2Config(num_labels=10, tf_padding=False, image_size=32,
                                                             classifier_dropout_prob=0.0, finegrained_output=True,
                                                             layer_norm_eps=1e-5))
    pd = paddle.vision.models.mobilenet_v2(num_classes=10)
    for layer in pd.sublayers():  # transformers' BatchNorm momentum 0.997 is Paddle's 0.003 (the port's own line)
        if isinstance(layer, paddle.nn.BatchNorm2D):
            layer._momentum = 1 - 0.997
    x = np.random.RandomState(0).randn(2, 3, 32, 32).astype("float32")
    return pt, pd, x, None


def torchvision_model(name, size=64):
    """torchvision's classification model against paddle.vision's of the same name, both built as a user builds
    them (10 classes), at a small image size; googlenet and inception_v3 without their auxiliary heads."""
    def build(config):
        from tools.zoo.torchvision_cpu import import_torchvision
        aux = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
        pt = getattr(import_torchvision().models, name)(num_classes=10, **aux)
        pd = getattr(paddle.vision.models, name)(num_classes=10, **config)
        return pt, pd, np.random.RandomState(0).randn(2, 3, size, size).astype("float32"), None
    return build


# the smallest image each pair runs on: paddle.vision's AlexNet has no adaptive pooling before its classifier
VISION_SIZE = {"alexnet": 224, "inception_v3": 96}
TORCHVISION = ("alexnet", "vgg11", "resnet18", "resnext50_32x4d", "wide_resnet50_2", "densenet121", "squeezenet1_1",
               "shufflenet_v2_x1_0", "mobilenet_v2", "mobilenet_v3_small", "googlenet", "inception_v3")


def recurrent(kind):
    def build(config):
        pt = getattr(torch.nn, kind)(8, 16, num_layers=2, batch_first=True)
        pd = getattr(paddle.nn, kind)(8, 16, num_layers=2)
        return pt, pd, np.random.RandomState(0).randn(4, 6, 8).astype("float32"), None
    return build


def transformer_encoder(config):
    """torch's attention packs q, k, v in in_proj_weight [3E, E], Paddle's computes them in q_proj, k_proj, v_proj:
    the recipe's layout, as a user passes it (config["split"]: the parts in another order, a mis-stated layout)."""
    from portcheck.mapping.recipes import TORCH_ATTENTION
    split = config.pop("split", None)
    pt = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True), 2,
                                     enable_nested_tensor=False)
    layer = paddle.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, **config)
    pd = paddle.nn.TransformerEncoder(layer, 2)
    layouts = {"MultiheadAttention": Fused(split, output=False)} if split else TORCH_ATTENTION
    return pt, pd, np.random.RandomState(0).randn(2, 6, 16).astype("float32"), layouts


def cnn(config):
    """A small CNN: a conv with its bias before a BatchNorm (torch's default), ReLU, Dropout, a conv, GELU (exact
    or tanh), pooling and a Linear head, written once per framework."""
    def layers(nn, side):
        conv = nn.Conv2d if side == "torch" else nn.Conv2D
        bn = nn.BatchNorm2d if side == "torch" else nn.BatchNorm2D
        pool = nn.AdaptiveAvgPool2d if side == "torch" else nn.AdaptiveAvgPool2D
        tanh = config["gelu"] == "tanh"
        gelu = nn.GELU(approximate="tanh" if tanh else "none") if side == "torch" else \
            nn.GELU(approximate=config.get("paddle_gelu_tanh", tanh))
        drop = nn.Dropout(config.get("dropout", 0.0), **({"mode": config["dropout_mode"]}
                                                           if side == "paddle" and "dropout_mode" in config else {}))
        bn_kw = {"momentum": config["bn_momentum"]} if side == "paddle" and "bn_momentum" in config else {}
        return nn.Sequential(conv(3, 8, 3, padding=1), bn(8, **bn_kw), nn.ReLU(), drop, conv(8, 8, 3, padding=1),
                             gelu, pool(1), nn.Flatten(), nn.Linear(8, 4))
    return (layers(torch.nn, "torch"), layers(paddle.nn, "paddle"),
            np.random.RandomState(0).randn(4, 3, 8, 8).astype("float32"), None)


MODELS = {"bert": bert, "distilbert": distilbert, "electra": electra, "llama": llama, "roberta": roberta,
          "ernie": ernie, "albert": albert, "opt": opt, "bloom": bloom,
          "gpt2 split": lambda c: gpt2(c, False), "gpt2 fused": lambda c: gpt2(c, True),
          "resnet18": vision_resnet, "mobilenet_v2": mobilenet_v2, "lstm": recurrent("LSTM"),
          "gru": recurrent("GRU"), "transformer encoder": transformer_encoder, "cnn": cnn,
          **{f"torchvision {n}": torchvision_model(n, VISION_SIZE.get(n, 64)) for n in TORCHVISION}, "habit": habit}


def _first(out):
    if isinstance(out, (torch.Tensor, paddle.Tensor)):
        return out
    return out[0]


def dropout_off(model):
    """Every Dropout module in eval mode, as docs/own_model.md's Step 4 asks: each framework draws its own masks."""
    kinds = (torch.nn.modules.dropout._DropoutNd, paddle.nn.Dropout, paddle.nn.Dropout2D, paddle.nn.Dropout3D,
             paddle.nn.AlphaDropout)
    for m in (model.modules() if isinstance(model, torch.nn.Module) else model.sublayers()):
        if isinstance(m, kinds):
            m.eval()


def model(case, plant) -> list:
    """Step 1: compare_forward in eval mode, cumulative and isolated; Step 4 (when the case covers it):
    compare_backward, 2 steps of momentum SGD on a mean-square loss of the model's first output, in train mode with
    every Dropout off (dropout_off, as the guide's Step 4 asks)."""
    torch.manual_seed(case.get("seed", 0))
    paddle.seed(case.get("seed", 0))
    pt, pd, x, layouts = MODELS[case["model"]]({**case.get("config", {}), **((plant or {}).get("config") or {})})
    name_map = case.get("name_map")
    pd.set_state_dict(convert(pt, pd, name_map, inputs=x, layouts=layouts, keep=case.get("keep", ())))
    plant_paddle(pd, {"set": case.get("fix", ()), **({"eps_all": case["eps_all"]} if "eps_all" in case else {})})
    plant_paddle(pd, plant)
    out = forward_judgements(compare_forward(pt.eval(), pd.eval(), x, name_map, isolate=True, layouts=layouts))
    if 4 in case["steps"]:
        with torch.no_grad():
            target = _first(pt(**{k: torch.from_numpy(v) for k, v in x.items()}) if isinstance(x, dict) else
                            pt(torch.from_numpy(x))).numpy()
        target = np.random.RandomState(1).randn(*target.shape).astype("float32")
        loss = (lambda o, y: ((_first(o) - y) ** 2).mean(), lambda o, y: ((_first(o) - y) ** 2).mean())
        sgd = (lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9),
               lambda ps: paddle.optimizer.Momentum(learning_rate=0.01, momentum=0.9, parameters=ps))
        train = case.get("train_mode", True)
        pt.train(train), pd.train() if train else pd.eval()
        dropout_off(pt), dropout_off(pd)
        report = compare_backward(pt, pd, x, target, loss=loss,
                                  optimizer=sgd, steps=2, name_map=name_map, layouts=layouts)
        # compare_backward's first forward (train mode: batch statistics) is its verdict too, a rule of its own here:
        # dropped as a repeat of step 1's, it hid a false red of compare_backward alone (densenet121's features.norm5)
        out += [j._replace(rule="compare_backward's first forward (K=16)") if j.rule.startswith("forward, every") else j
                for j in backward_judgements(report) if not j.rule.startswith("forward, each")]
    return out
