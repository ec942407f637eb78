"""One tensor held on two levels (portcheck.mapping.loose: held_twice, on_two_levels): a torch LM head holding its bias
itself and tying its child Linear's bias to it, the child's weight tied to the embedding (transformers' BERT and
RoFormer heads), against a port's head holding decoder_weight (the embedding's, tied) and decoder_bias as bare
parameters of its own (paddlenlp's). Converted with no map, the head paired with the head: green; the port's bias
shifted red at the head; the port's head weight untied from its embedding red at the head's gradient. The same from
two saved records (record_forward, record_backward on each side), as a pt_/pd_ script pair judges them."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert, judge_forward, record_forward  # noqa: E402
from portcheck.gradients.backward import judge_backward, record_backward  # noqa: E402

VOCAB, HIDDEN = 11, 6
X = np.random.RandomState(0).randint(0, VOCAB, (2, 5)).astype("int64")
Y = np.random.RandomState(1).randint(0, VOCAB, (2, 5)).astype("int64")


def pair(plant=None):
    """An embedding, a layer and an LM head of a transform and a decoder tied to the embedding. plant "shifted": the
    port adds its bias shifted by 0.01 on every other word; "untied": the port's head holds a weight of its own."""
    class Head(torch.nn.Module):
        def __init__(self, embedding):
            super().__init__()
            self.transform = torch.nn.Linear(HIDDEN, HIDDEN)
            self.decoder = torch.nn.Linear(HIDDEN, VOCAB, bias=False)
            self.bias = torch.nn.Parameter(torch.randn(VOCAB))
            self.decoder.bias, self.decoder.weight = self.bias, embedding.weight

        def forward(self, hidden):
            return self.decoder(torch.tanh(self.transform(hidden)))

    class Torch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings, self.layer = torch.nn.Embedding(VOCAB, HIDDEN), torch.nn.Linear(HIDDEN, HIDDEN)
            self.head = Head(self.embeddings)

        def forward(self, ids):
            return self.head(self.layer(self.embeddings(ids)))

    class PortHead(paddle.nn.Layer):
        def __init__(self, embedding_weights):
            super().__init__()
            self.transform = paddle.nn.Linear(HIDDEN, HIDDEN)
            self.decoder_weight = self.create_parameter([VOCAB, HIDDEN]) if plant == "untied" else embedding_weights
            self.decoder_bias = self.create_parameter([VOCAB], is_bias=True)

        def forward(self, hidden):
            bias = self.decoder_bias + paddle.to_tensor(0.01 * (np.arange(VOCAB) % 2), "float32") \
                if plant == "shifted" else self.decoder_bias
            return paddle.matmul(paddle.tanh(self.transform(hidden)), self.decoder_weight, transpose_y=True) + bias

    class Port(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embeddings, self.layer = paddle.nn.Embedding(VOCAB, HIDDEN), paddle.nn.Linear(HIDDEN, HIDDEN)
            self.head = PortHead(self.embeddings.weight)

        def forward(self, ids):
            return self.head(self.layer(self.embeddings(ids)))

    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = Torch().eval(), Port().eval()
    state = convert(pt, pd, inputs=X)
    return pt, pd, state


def test_a_head_holding_its_childs_tensors_bare_converts_with_no_map_and_is_green():
    pt, pd, state = pair()
    assert np.array_equal(pd.head.decoder_bias.numpy(), pt.head.bias.detach().numpy())
    assert np.array_equal(pd.embeddings.weight.numpy(), pt.embeddings.weight.detach().numpy())
    assert "torch head.bias, the very tensor head.decoder.bias is" in state.said
    report = compare_forward(pt, pd, X)
    assert report.passed and report.pairing.pairs.get("head") == "head"
    assert {r.key for r in report.rows if r.max == r.max} >= {"head", "head.transform", "(model)"}


def test_the_ports_bias_shifted_is_red_at_the_head():
    pt, pd, _ = pair(plant="shifted")
    report = compare_forward(pt, pd, X)
    red = [r.key for r in report.rows if r.max > 1e-3]
    assert not report.passed and red[0] == "head", red


LOSS = (lambda o, t: torch.nn.functional.cross_entropy(o.reshape(-1, VOCAB), t.reshape(-1)),
        lambda o, t: paddle.nn.functional.cross_entropy(o.reshape([-1, VOCAB]), t.reshape([-1])))
SGD = (lambda p: torch.optim.SGD(p, lr=0.5), lambda p: paddle.optimizer.SGD(0.5, parameters=p))


def test_the_ports_head_untied_from_its_embedding_is_red_at_the_heads_gradient():
    """Filled from the one tensor, the port then trains two: the forward agrees, the head's gradient does not."""
    pt, pd, _ = pair(plant="untied")
    assert compare_forward(pt, pd, X).passed
    report = compare_backward(pt, pd, X, Y, LOSS, SGD, steps=2)
    assert not report.passed
    assert "grad head.decoder.weight" in [r.key for r in report.grads if not r.passed]


@pytest.mark.parametrize("plant", [None, "shifted", "untied"])
def test_two_saved_records_pair_the_heads_and_judge_the_bias_under_both_its_names(plant):
    """Records keep shapes, not which tensor is which: the head's own bias, of its child's bias's shape, which the
    port's head no longer holds once the child's are taken, is the child's. Before: the heads paired with nothing,
    and grad head.bias had no counterpart on paddle on a correct port."""
    pt, pd, _ = pair(plant)
    forward = judge_forward(record_forward(pt, X), record_forward(pd, X))
    assert forward.passed is (plant != "shifted") and forward.pairing.pairs.get("head") == "head"
    assert plant != "shifted" or [r.key for r in forward.rows if r.max > 1e-3][0] == "head"
    records = [record_backward(model.train(), X, Y, loss, opt, steps=2)
               for model, loss, opt in zip((pt, pd), LOSS, SGD)]
    backward = judge_backward(*records)
    red = [r.name for r in backward.grads if not r.passed]
    assert "grad head.bias" in {r.name for r in backward.grads}
    assert backward.passed is (plant is None), backward.table()
    assert plant != "untied" or red == ["grad embeddings.weight", "grad head.decoder.weight"], backward.table()
