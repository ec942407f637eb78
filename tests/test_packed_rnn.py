"""torch's LSTM fed a PackedSequence against Paddle's fed sequence_length= (tests/ports/rnn.py): torch returns the
real tokens packed, [22, 48], Paddle the padded batch, [4, 9, 48], every weight of one shape. convert refused the
correct port (PC315: "the two models' configs differ there ... which no name_map can stand in for"). The record keeps
torch's packed output as it is and where each row sits in the padded batch (mapping.packed); the pairing takes the
padded output for it, the judge reads Paddle's at the real tokens' places: forward, isolated, from saved records and
backward green, each plant red where it is."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_backward, compare_forward, convert, judge_forward, record_forward  # noqa: E402
from portcheck.mapping import packed  # noqa: E402
from ports import rnn  # noqa: E402


def pair(plant=None, inputs=True):
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd = rnn.LSTMClassifier().eval(), rnn.PortLSTMClassifier(plant)
    convert(pt, pd, inputs=rnn.BATCH if inputs else None)
    return pt, pd.eval()


@pytest.mark.parametrize("inputs", [True, False], ids=["inputs", "no inputs"])
def test_a_packed_lstm_against_a_padded_one_is_green_on_the_real_tokens(inputs):
    pt, pd = pair(inputs=inputs)
    report = compare_forward(pt, pd, rnn.BATCH, isolate=True)
    assert report.passed and report.pairing.pairs["rnn"] == "rnn", report.table()
    row = next(r for r in report.rows if r.name == "rnn[0]")
    assert row.shape == (int(rnn.LENGTHS.sum()), 48) and row.passed, report.table()


def test_saved_records_and_the_backward_pass_of_a_packed_lstm_are_green(tmp_path):
    pt, pd = pair()
    report = judge_forward(record_forward(pt, rnn.BATCH, tmp_path / "torch"), record_forward(pd, rnn.BATCH,
                                                                                          tmp_path / "paddle"))
    assert report.passed, report.table()
    y = np.array([0, 1, 2, 1], "int64")
    loss = (lambda o, t: torch.nn.functional.cross_entropy(o, t), lambda o, t: paddle.nn.functional.cross_entropy(o, t))
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: paddle.optimizer.SGD(0.1, parameters=ps))
    backward = compare_backward(pt.train(), pd.train(), rnn.BATCH, y, loss=loss, optimizer=sgd, steps=2)
    assert backward.passed, backward.table()


def test_a_plant_in_or_after_the_packed_lstm_is_red_where_it_is():
    """Every sequence read one token short: red at rnn (isolated: its own computation); one direction zeroed after
    it: the model's own forward before fc."""
    report = compare_forward(*pair("lengths"), rnn.BATCH, isolate=True)
    assert not report.passed and report.first_diverging == "rnn[0]" and report.differing == ["rnn"], report.table()
    report = compare_forward(*pair("forward"), rnn.BATCH)
    assert not report.passed and report.first_diverging == "(model) (before fc)", report.table()


def test_packed_rows_are_read_batch_first_or_time_first_and_only_where_they_fit():
    lengths = torch.tensor([3, 1, 2])
    padded = torch.arange(3 * 3 * 2, dtype=torch.float32).reshape(3, 3, 2)  # [B, T, 2], B == T
    sequence = torch.nn.utils.rnn.pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
    where = packed.positions(sequence)
    data = sequence.data.numpy()
    np.testing.assert_array_equal(packed.as_packed(where, padded.numpy(), data), data)
    time_first = np.ascontiguousarray(padded.numpy().transpose(1, 0, 2))
    np.testing.assert_array_equal(packed.as_packed(where, time_first, data), data)  # B == T: the values say which
    longer = np.concatenate([padded.numpy(), np.full((3, 4, 2), 7.0, "float32")], axis=1)  # padded further: T 7
    np.testing.assert_array_equal(packed.as_packed(where, longer, data), data)
    assert packed.fits(data.shape, packed.extent(where), longer.shape)
    assert not packed.fits(data.shape, packed.extent(where), (3, 2, 2))  # shorter than the longest sequence
    assert not packed.fits(data.shape, packed.extent(where), (2, 3, 2))  # a sequence missing
