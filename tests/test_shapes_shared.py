"""Outputs returned in broadcastable forms (a position table [seq, d] on one side, [batch, seq, d] on the other) are
compared as broadcast, and an embedding two submodules share (T5's `shared`, read by the encoder and the decoder)
pairs without a map, whichever name each side defines it under."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")

from portcheck import compare_forward, convert  # noqa: E402

B, L, D, V = 2, 5, 8, 11


class TorchTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(L, D))

    def forward(self, x):
        return self.table[: x.shape[1]]  # [seq, d]


class PaddleTable(paddle.nn.Layer):
    def __init__(self, shift=0.0):
        super().__init__()
        self.table, self.shift = paddle.create_parameter([L, D], "float32"), shift

    def forward(self, x):  # [batch, seq, d]
        return (self.table[: x.shape[1]] + self.shift).unsqueeze(0).expand([x.shape[0], x.shape[1], D])


def with_table(nn, table):
    class Model(nn.Module if nn is torch.nn else nn.Layer):
        def __init__(self):
            super().__init__()
            self.pos, self.fc = table, nn.Linear(D, D)

        def forward(self, x):
            return self.fc(x + self.pos(x))
    return Model()


def test_a_position_table_against_its_batch_broadcast_is_compared_as_broadcast_and_a_shift_in_it_is_red():
    x = np.random.RandomState(0).randn(B, L, D).astype(np.float32)
    for shift, green in ((0.0, True), (1e-3, False)):
        torch.manual_seed(0)
        t, p = with_table(torch.nn, TorchTable()), with_table(paddle.nn, PaddleTable(shift))
        p.set_state_dict(convert(t, p, inputs=x, layouts={"TorchTable": "same"}))
        report = compare_forward(t, p, x, isolate=True)
        assert report.passed == green and report.pairing.pairs["pos"] == "pos", report.table()
        assert not green or "shapes [5, 8] and [2, 5, 8], one side broadcast over the other" in report.table()
        assert (report.first_diverging, report.differing) == ((None, []) if green else ("pos", ["pos"])), report.table()


def shared_pair(paddle_defines_shared_first: bool, scale: float = 1.0):
    def stack(nn, emb):
        class Stack(nn.Module if nn is torch.nn else nn.Layer):
            def __init__(self):
                super().__init__()
                self.embed_tokens, self.fc = emb, nn.Linear(D, D)

            def forward(self, ids):
                return self.fc(self.embed_tokens(ids))
        return Stack()

    class TorchModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = torch.nn.Embedding(V, D)
            self.encoder, self.decoder = stack(torch.nn, self.shared), stack(torch.nn, self.shared)

        def forward(self, ids):
            return self.decoder(ids) + self.encoder(ids)

    class PaddleModel(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            emb = paddle.nn.Embedding(V, D)
            if paddle_defines_shared_first:
                self.shared = emb
            self.encoder, self.decoder = stack(paddle.nn, emb), stack(paddle.nn, emb)
            if not paddle_defines_shared_first:  # then Paddle names it encoder.embed_tokens
                self.shared = emb

        def forward(self, ids):
            return self.decoder(ids) + self.encoder(ids)
    torch.manual_seed(0)
    t, p = TorchModel(), PaddleModel()
    ids = np.random.RandomState(0).randint(0, V, (B, L)).astype(np.int64)
    p.set_state_dict(convert(t, p, inputs=ids))
    p.encoder.fc.weight.set_value(p.encoder.fc.weight.numpy() * scale)
    return t, p, ids


@pytest.mark.parametrize("first", [True, False], ids=["shared first", "shared named under the encoder"])
def test_an_embedding_shared_by_encoder_and_decoder_pairs_without_a_map(first):
    report = compare_forward(*shared_pair(first))
    pairs = report.pairing.pairs
    assert report.passed and pairs["encoder"] == "encoder" and pairs["decoder"] == "decoder", report.pairs()
    assert not report.pairing.torch_unpaired and not report.pairing.paddle_unpaired, report.pairs()
    planted = compare_forward(*shared_pair(first, scale=1.001))
    assert not planted.passed and planted.first_diverging == "encoder.fc", planted.table()
