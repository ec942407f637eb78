"""Modules paired with no name map (portcheck.pairing), layouts for either side's own types, and each module
judged on its own computation (isolate=True): on library pairs no one here wrote and small pairs built here."""
import ast
import copy
import re
import warnings

import numpy as np
import pytest

from portcheck.core import calibrated
from portcheck.core.errors import PipelineError

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert, judge_forward, record_forward  # noqa: E402


def same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------- the named pairs, no map

def test_resnet18_example_pairs_with_no_map():
    """RESNET_MAP's ten rules, found by the run: the same weights, the same rows. Without a run, definition
    order cannot tell bn2 from downsample.1 (transformers defines the shortcut first): refused, naming both."""
    from examples.resnet18 import resnet
    pt = resnet.new_torch_model().eval()
    pd = paddle.vision.models.resnet18(num_classes=resnet.CLASSES).eval()
    x = resnet.batch()[0]
    state = convert(pt, pd, inputs=x)
    assert same_state(state, convert(pt, pd, resnet.RESNET_MAP))
    with pytest.raises(PipelineError, match=r"torch resnet.encoder.stages.1.layers.0.layer.1.normalization fits Paddle "
                                            r"layer2.0.bn2 and layer2.0.downsample.1 equally \(name_map=\{'resnet.encoder"
                                            r".stages.1.layers.0.layer.1.normalization': 'layer2.0.bn2'\} or "
                                            r"name_map=\{'resnet.encoder.stages.1.layers.0.layer.1.normalization': "
                                            r"'layer2.0.downsample.1'\}\)"):
        convert(pt, pd)
    pd.set_state_dict(state)
    report, mapped = compare_forward(pt, pd, x), compare_forward(pt, pd, x, resnet.RESNET_MAP)
    assert report.passed and [r.name for r in report.paired] == [r.name for r in mapped.paired], report.table()
    assert "resnet.encoder.stages.1.layers.0.shortcut.normalization -> layer2.0.downsample.1" in report.pairs()


def test_transformers_bert_against_paddlenlp_with_no_map():
    from paddlenlp.transformers import BertConfig as PaddleConfig, BertModel as PaddleBert
    from transformers import BertConfig, BertModel
    from portcheck.mapping.recipes import PADDLENLP_BERT
    sizes = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 max_position_embeddings=64)
    torch.manual_seed(0)
    pt = BertModel(BertConfig(**sizes, attn_implementation="eager")).eval()
    pd = PaddleBert(PaddleConfig(**sizes, type_vocab_size=2)).eval()
    ids = {"input_ids": np.random.RandomState(0).randint(1, 100, (2, 16)).astype("int64")}
    state = convert(pt, pd, inputs=ids)
    assert same_state(state, convert(pt, pd, PADDLENLP_BERT))
    pd.set_state_dict(state)
    report = compare_forward(pt, pd, ids)
    assert report.passed, report.table()
    pairs = report.pairs().splitlines()
    for line in ("encoder.layer.1.attention.self.query -> encoder.layers.1.self_attn.q_proj",
                 "encoder.layer.1.output.LayerNorm -> encoder.layers.1.norm2", "encoder.layer.1 -> encoder.layers.1"):
        assert line in pairs, report.pairs()
    # attention.self holds query, key and value; paddle's self_attn holds out_proj too: they compute different things
    assert not any(p.startswith("encoder.layer.1.attention.self ->") for p in pairs)
    assert "Paddle calls unpaired (4): encoder.layers.0.self_attn, encoder.layers.0.dropout" in report.pairs()


class TorchLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(20, 8)
        self.rnn = torch.nn.LSTM(8, 6, num_layers=2, bidirectional=True, batch_first=True)
        self.head = torch.nn.Linear(12, 3)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0][:, -1])


class PaddleLSTM(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.emb = paddle.nn.Embedding(20, 8)
        self.lstm = paddle.nn.LSTM(8, 6, num_layers=2, direction="bidirect")
        self.fc = paddle.nn.Linear(12, 3)

    def forward(self, ids):
        return self.fc(self.lstm(self.emb(ids))[0][:, -1])


def test_two_layer_bidirectional_lstm_with_no_map():
    torch.manual_seed(0)
    pt, pd = TorchLSTM().eval(), PaddleLSTM().eval()
    ids = np.random.RandomState(0).randint(0, 20, (2, 5)).astype("int64")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = convert(pt, pd)  # definition order suffices here; the run agrees
        pd.set_state_dict(state)
    # Paddle's RNN names each weight twice (weight_ih_l0, 0.cell_fw.weight_ih): both answered, none skipped
    assert set(state) == set(pd.state_dict()) and not [w for w in caught if "Skip loading" in str(w.message)]
    assert np.array_equal(state["lstm.weight_ih_l0"], state["lstm.0.cell_fw.weight_ih"])
    assert same_state(convert(pt, pd), convert(pt, pd, inputs=ids))
    report = compare_forward(pt, pd, ids)
    assert report.passed and {"embed -> emb", "rnn -> lstm", "head -> fc"} <= set(report.pairs().splitlines())
    assert [r.name for r in report.paired] == ["embed", "rnn[0]", "rnn[1][0]", "rnn[1][1]", "head", "(model)"]



def test_the_frameworks_own_lstm_pair_runs_through_the_library_alone(builtin_pair_run):
    """examples/builtin_pair.py, which CI runs in the venv holding only numpy, torch and paddlepaddle: each
    framework's own LSTM green forward, isolated and over optimizer steps; its gates swapped in Paddle, red. Its run
    is conftest's (builtin_pair_run: a new interpreter in an empty folder, once per suite run, its docs page's lines
    asserted by tests/test_docs_blocks.py)."""
    proc = builtin_pair_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "clean pair: forward green" in proc.stdout and "steps green" in proc.stdout, proc.stdout
    assert "gates swapped in Paddle's first layer: RED" in proc.stdout, proc.stdout

LLAMA = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0)
IDS = {"input_ids": np.random.RandomState(0).randint(1, 64, (2, 16)).astype("int64")}


@pytest.fixture(scope="module")
def llama():
    """transformers' LlamaForCausalLM, tiny, random weights, built offline from its config."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**LLAMA, use_cache=False, attn_implementation="eager")).eval()


def paddle_llama(pt, **config):
    from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM
    pd = LlamaForCausalLM(LlamaConfig(**{**LLAMA, **config}, use_cache=False)).eval()
    pd.set_state_dict(convert(pt, pd, layouts={"LlamaLMHead": "transpose"}, inputs=IDS))
    return pd


def test_llama_converts_with_no_map_and_its_head_declared_by_paddles_type(llama):
    """paddlenlp's lm_head is a LlamaLMHead holding a Linear's weight [in, out]: taken with no map as the Linear it
    holds (before: PC012, its layouts= to paste), as declared by that Paddle type; the pair converts with no hand
    work (LlamaRMSNorm, 1-D, keeps its layout undeclared) and compares green."""
    from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM
    pd = LlamaForCausalLM(LlamaConfig(**LLAMA, use_cache=False)).eval()
    assert same_state(convert(llama, pd, inputs=IDS), convert(llama, pd, layouts={"LlamaLMHead": "transpose"}))
    state = convert(llama, pd, layouts={"LlamaLMHead": "transpose"}, inputs=IDS)
    assert np.array_equal(state["lm_head.weight"], llama.lm_head.weight.detach().numpy().T)
    assert same_state(state, convert(llama, pd, layouts={"LlamaLMHead": "transpose"}))  # definition order agrees
    pd.set_state_dict(state)
    report = compare_forward(llama, pd, IDS, isolate=True)
    assert report.passed and report.differing == [], report.table()
    assert {"lm_head -> lm_head", "model -> llama", "model.layers.1.mlp.up_proj -> llama.layers.1.mlp.up_proj"} \
        <= set(report.pairs().splitlines())


@pytest.mark.parametrize("plant, where", [
    ("rotary base", "model.layers.0.self_attn"),
    ("RMSNorm epsilon", "model.layers.1.input_layernorm"),
    ("swapped gate and up projections", "model.layers.0.mlp.gate_proj"),
])
def test_bugs_planted_in_the_llama_pair_are_named_at_their_module(llama, plant, where):
    pd = paddle_llama(llama, **({"rope_theta": 500000.0} if plant == "rotary base" else {}))
    if plant == "RMSNorm epsilon":
        pd.llama.layers[1].input_layernorm.variance_epsilon = 1e-5
    elif plant.startswith("swapped"):
        mlp = pd.llama.layers[0].mlp
        gate, up = mlp.gate_proj.weight.numpy(), mlp.up_proj.weight.numpy()
        mlp.gate_proj.weight.set_value(up), mlp.up_proj.weight.set_value(gate)
    report = compare_forward(llama, pd, IDS, isolate=True)
    assert not report.passed and report.first_diverging.startswith(where), report.table()
    assert report.differing[0].startswith(where), report.differing
    if plant == "rotary base":  # the rotation is computed inside attention, before o_proj: every layer's
        assert report.differing == [f"model.layers.{i}.self_attn (before model.layers.{i}.self_attn.o_proj)"
                                    for i in (0, 1)]


def test_electra_a_pair_no_one_named_with_no_map_and_a_functional_activation_planted():
    """transformers' ElectraModel against paddlenlp's (its encoder is paddle.nn.TransformerEncoder, which calls
    its activation as a function): paired and green with no map. With ReLU planted for GELU, first_diverging and
    the row the table marks are one module, the first encoder layer, which computes it, not the model's output;
    isolated, both layers are named, each before the module its activation feeds."""
    from paddlenlp.transformers import ElectraConfig as PaddleConfig, ElectraModel as PaddleElectra
    from transformers import ElectraConfig, ElectraModel
    sizes = dict(vocab_size=100, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    pt = ElectraModel(ElectraConfig(**sizes)).eval()
    pd = PaddleElectra(PaddleConfig(**sizes, type_vocab_size=2)).eval()
    ids = {"input_ids": np.random.RandomState(0).randint(1, 100, (2, 16)).astype("int64")}
    pd.set_state_dict(convert(pt, pd, inputs=ids))
    report = compare_forward(pt, pd, ids)
    assert report.passed, report.table()
    assert "encoder.layer.1.intermediate.dense -> encoder.layers.1.linear1" in report.pairs()
    for layer in pd.encoder.layers:
        layer.activation = paddle.nn.functional.relu
    report = compare_forward(pt, pd, ids, isolate=True)
    marked = [line.split()[0] for line in report.table().splitlines() if calibrated.ORIGIN in line]
    assert report.first_diverging == "encoder.layer.0[0]" and marked == [report.first_diverging], report.table()
    assert report.differing == [f"encoder.layer.{i} (before encoder.layer.{i}.output.dense)" for i in (0, 1)], \
        report.table()


# ---------------------------------------------------------------- what an alignment survives, and refuses

class TorchNet(torch.nn.Module):
    """A wrapper Paddle does not have (features), an activation module Paddle calls as a function (GELU), one
    activation module called twice (act), a norm of its own type."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4))
        self.gelu = torch.nn.GELU()
        self.proj = torch.nn.Linear(4, 4)
        self.act = torch.nn.Tanh()
        self.out = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x):
        h = self.gelu(self.features(x)).mean((2, 3))
        return self.head(self.act(self.out(self.act(self.proj(h)))))


class PaddleNet(paddle.nn.Layer):
    """No wrapper, GELU as a function, two activation modules, the linears in a container of its own."""

    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 4, 3, padding=1)
        self.bn = paddle.nn.BatchNorm2D(4)
        self.mlp = paddle.nn.LayerList([paddle.nn.Linear(4, 4), paddle.nn.Linear(4, 4)])
        self.act1, self.act2 = paddle.nn.Tanh(), paddle.nn.Tanh()
        self.classifier = paddle.nn.Linear(4, 3)

    def forward(self, x):
        h = paddle.nn.functional.gelu(self.bn(self.conv(x))).mean((2, 3))
        return self.classifier(self.act2(self.mlp[1](self.act1(self.mlp[0](h)))))


X = np.random.RandomState(0).randn(2, 3, 8, 8).astype("float32")


def net_pair():
    torch.manual_seed(0)
    pt = TorchNet()
    with torch.no_grad():
        pt.features[1].running_mean.uniform_(-0.5, 0.5), pt.features[1].running_var.uniform_(0.5, 2.0)
    pd = PaddleNet()
    pd.set_state_dict(convert(pt, pd, inputs=X))
    return pt.eval(), pd.eval()


def test_wrappers_folded_activations_a_module_called_twice_and_extra_containers():
    """proj and out are both Linear(4, 4), so only the run's order tells them apart (the same shapes, no shared
    name): proj is mlp.0, out mlp.1, act's two calls act1 and act2."""
    pt, pd = net_pair()
    report = compare_forward(pt, pd, X)
    assert report.passed, report.table()
    assert report.pairs().splitlines()[:8] == [
        "features.0 -> conv", "features.1 -> bn", "proj -> mlp.0", "act -> act1", "out -> mlp.1", "act#2 -> act2",
        "head -> classifier", "(model) -> (model)"]
    assert report.pairs().splitlines()[8:] == ["torch calls unpaired (2): features, gelu", "Paddle calls unpaired (0): -"]
    assert convert(pt, pd, inputs=X)["mlp.1.weight"].tolist() == pt.out.weight.detach().numpy().T.tolist()


def test_a_map_overrides_the_pairs_it_names_and_the_rest_stays_automatic():
    pt, pd = net_pair()
    report = compare_forward(pt, pd, X, {"proj": "mlp.0", "head": "classifier"})
    assert report.passed and {"proj -> mlp.0 (name map)", "out -> mlp.1", "head -> classifier (name map)"} <= \
        set(report.pairs().splitlines()), report.pairs()
    report = compare_forward(pt, pd, X, {"proj": "mlp.1", "act": "act2"})  # wrong on purpose: kept, and red
    assert {"proj -> mlp.1 (name map)", "act -> act2 (name map)", "head -> classifier"} <= \
        set(report.pairs().splitlines()), report.pairs()
    assert not report.passed and report.first_diverging == "proj", report.table()


class TwoLinear(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.p1, self.p2 = paddle.nn.Linear(4, 4), paddle.nn.Linear(4, 4)

    def forward(self, x):
        return self.p1(x) + self.p2(x)


def test_an_ambiguity_is_refused_naming_the_modules_and_the_map_entry():
    torch.manual_seed(0)
    pt = torch.nn.Sequential(torch.nn.Linear(4, 4))
    x = np.ones((2, 4), np.float32)
    t, p = record_forward(pt, x), record_forward(TwoLinear(), x)
    with pytest.raises(PipelineError, match=r"^modules cannot be paired automatically, by their structure nor by the "
                                            r"run's values: torch 0 fits Paddle p1 and p2 equally \(name_map=\{'0': "
                                            r"'p1'\} or name_map=\{'0': 'p2'\}\): give the name_map that says which"):
        judge_forward(t, p)
    assert "0 -> p2 (name map)" in judge_forward(t, p, {"0": "p2"}).pairs()  # the entry settles it
    with pytest.raises(PipelineError) as e:
        judge_forward(t, p)
    error = str(e.value)
    assert "inputs=" not in error  # the records hold a run: the hint does not ask for one
    each = [ast.literal_eval(m) for m in re.findall(r"name_map=(\{.*?\})", error)]
    every = ast.literal_eval(re.search(r"says which \(name_map=(\[.*?\]) takes each", error).group(1))
    assert each == [{"0": "p1"}, {"0": "p2"}] and every == [("^0$", "p1")]
    for name_map in each + [every]:  # pasted as printed, each pairs
        assert "0 -> p" in judge_forward(t, p, name_map).pairs()


def test_saved_records_pair_alone(tmp_path):
    """A record holds what pairing needs of each module (mod/ keys): two saved files pair without the models."""
    from portcheck.core.fileio import load_npy, save_npy
    pt, pd = net_pair()
    for name, model in (("t", pt), ("p", pd)):
        save_npy(tmp_path / f"{name}.npy", record_forward(model, X))
    report = judge_forward(load_npy(tmp_path / "t.npy"), load_npy(tmp_path / "p.npy"))
    assert report.passed and "act#2 -> act2" in report.pairs()


# ---------------------------------------------------------------- isolated judgement

def test_two_planted_bugs_are_both_named_isolated_and_only_the_first_cumulatively():
    """Cumulatively, everything after the first bug differs too, and only the first is named; on torch's own
    values each module's computation is judged alone, and both are named: a BatchNorm epsilon and a Linear 0.1%
    off. A GELU computed as ReLU between two modules is named at the module that computes it (the model itself
    here), before the module it feeds."""
    pt, pd = net_pair()
    report = compare_forward(pt, pd, X, isolate=True)
    assert report.passed and report.differing == [], report.table()
    worst = max(r.max / r.allowed for r in report.isolated if not r.problem)
    assert worst < 0.5, report.table()
    pd.bn._epsilon = 1e-3
    pd.mlp[1].weight.set_value(pd.mlp[1].weight.numpy() * 1.001)
    report = compare_forward(pt, pd, X, isolate=True)
    assert report.first_diverging == "features.1" and report.differing == ["features.1", "out"], report.table()
    assert "modules whose own computation differs: features.1 (Paddle: bn), out (Paddle: mlp.1)" in report.table()
    assert (report.first_diverging.both, [d.paddle for d in report.differing]) == ("features.1 (Paddle: bn)",
                                                                                   ["bn", "mlp.1"])
    pt, pd = net_pair()
    pd.forward = lambda x: pd.classifier(pd.act2(pd.mlp[1](pd.act1(pd.mlp[0](
        paddle.nn.functional.relu(pd.bn(pd.conv(x))).mean((2, 3)))))))
    report = compare_forward(pt, pd, X, isolate=True)
    assert report.differing == ["(model) (before proj)"], report.table()
    assert report.differing[0].paddle == f"(model) (before {report.pairing.pairs['proj']})"


def mobilenet_like():
    """Depthwise-separable blocks as MobileNetV1's, with BatchNorm, on both sides under other names."""
    def block(nn, cin, cout, stride, conv, bn):
        return [conv(cin, cin, 3, stride, 1, groups=cin), bn(cin), nn.ReLU(), conv(cin, cout, 1), bn(cout), nn.ReLU()]
    layers = lambda nn, conv, bn: [conv(3, 8, 3, 2, 1), bn(8), nn.ReLU()] + block(nn, 8, 16, 1, conv, bn) + \
        block(nn, 16, 32, 2, conv, bn)
    torch.manual_seed(0)
    pt = torch.nn.Sequential(*layers(torch.nn, lambda *a, **k: torch.nn.Conv2d(*a, **k, bias=False),
                                     torch.nn.BatchNorm2d), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                             torch.nn.Linear(32, 5))
    pd = paddle.nn.Sequential(*layers(paddle.nn, lambda *a, **k: paddle.nn.Conv2D(*a, **k, bias_attr=False),
                                      paddle.nn.BatchNorm2D), paddle.nn.AdaptiveAvgPool2D(1), paddle.nn.Flatten(),
                              paddle.nn.Linear(32, 5))
    x = np.random.RandomState(0).randn(8, 3, 16, 16).astype("float32")
    pd.set_state_dict(convert(pt, pd, inputs=x))
    return pt.train(), pd.train(), x, np.random.RandomState(1).randint(0, 5, 8).astype("int64")


def momentum_sgd(pt, pd, x, y, paddle_decay, isolate):
    return compare_backward(
        pt, pd, x, y, loss=(torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy),
        optimizer=(lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4),
                   lambda ps: paddle.optimizer.Momentum(learning_rate=0.05, momentum=0.9, parameters=ps,
                                                        weight_decay=paddle.regularizer.L2Decay(paddle_decay))),
        steps=2, isolate=isolate)


def test_a_ten_times_paddle_weight_decay_is_red_in_isolated_training():
    """Each step from torch's weights: the update of one step, held to torch's own error for that step."""
    clean = momentum_sgd(*mobilenet_like(), 1e-4, isolate=True)
    assert clean.passed and clean.isolated, clean.table()
    rows = [r for rows in clean.steps for r in rows if not r.problem]
    assert max(r.max / r.allowed for r in rows) < 0.5, clean.table()
    assert {r.multiple for r in rows if r.name not in ("loss", "lr")} == {calibrated.K_STEP}
    assert "after step 2 (started from torch's weights after step 1)" in clean.table()
    red = momentum_sgd(*mobilenet_like(), 1e-3, isolate=True)
    assert not red.passed and red.first_diverging.endswith("after step 1"), red.table()
    worst = max((r for rows in red.steps for r in rows if not r.problem), key=lambda r: r.max / r.allowed)
    assert worst.max / worst.allowed > 10, red.table()
