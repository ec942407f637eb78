"""An LSTM text classifier as torch users write it, its padded batch packed (pack_padded_sequence) before the LSTM
and unpacked after, and its port as a user fixes PaConvert's output by hand: Paddle's LSTM given sequence_length=,
which reads the padded batch itself. torch's LSTM returns the packed real tokens [total tokens, 2H], Paddle's the
padded batch [B, T, 2H]; every weight has one shape on both sides."""
import numpy as np
import paddle
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

VOCAB, EMB, HIDDEN, CLASSES = 50, 16, 24, 3
LENGTHS = np.array([9, 4, 7, 2], "int64")
IDS = np.where(np.arange(9)[None, :] < LENGTHS[:, None],
               np.random.RandomState(0).randint(1, VOCAB, (4, 9)), 0).astype("int64")
BATCH = {"ids": IDS, "lengths": LENGTHS}


class LSTMClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, EMB, padding_idx=0)
        self.rnn = torch.nn.LSTM(EMB, HIDDEN, batch_first=True, bidirectional=True)
        self.fc = torch.nn.Linear(2 * HIDDEN, CLASSES)

    def forward(self, ids, lengths):
        x = self.embed(ids)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
        mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).unsqueeze(-1).float()
        pooled = (out * mask).sum(1) / lengths[:, None].float()
        return self.fc(pooled)


class PortLSTMClassifier(paddle.nn.Module):
    """PaConvert's output with its >>>>>> lines fixed: the LSTM reads sequence_length= instead of a packed batch.
    plant: "lengths" (every sequence read one token shorter), "forward" (one direction only, the backward half
    zeros)."""
    def __init__(self, plant=None):
        super().__init__()
        self.plant = plant
        self.embed = paddle.nn.Embedding(VOCAB, EMB, padding_idx=0)
        self.rnn = paddle.nn.LSTM(input_size=EMB, hidden_size=HIDDEN, time_major=not True, direction="bidirect")
        self.fc = paddle.compat.nn.Linear(2 * HIDDEN, CLASSES)

    def forward(self, ids, lengths):
        x = self.embed(ids)
        out, _ = self.rnn(x, sequence_length=lengths - 1 if self.plant == "lengths" else lengths)
        if self.plant == "forward":
            out = paddle.concat([out[:, :, :HIDDEN], paddle.zeros_like(out[:, :, HIDDEN:])], axis=-1)
        mask = (paddle.arange(ids.shape[1])[None, :] < lengths[:, None]).unsqueeze(-1).astype("float32")
        pooled = (out * mask).sum(1) / lengths[:, None].astype("float32")
        return self.fc(pooled)
