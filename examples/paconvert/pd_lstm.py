import paddle

"""An LSTM (or GRU) text classifier as sentiment repositories write it: padded batches from a collate function,
the embeddings packed by length into a bidirectional RNN chosen by name, its outputs unpacked and mean-pooled over
the real tokens, a Linear head."""


class TextDataset(paddle.io.Dataset):  # hand fix: paddle.utils.data does not exist; paddle.io
    def __init__(self, sequences, labels):
        self.sequences = sequences
        self.labels = labels

    def __len__(self):
        return len(self.sequences)

    def __getitem__(self, idx):
        return paddle.tensor(self.sequences[idx]), self.labels[idx]


def collate(batch):
    seqs, labels = zip(*batch)
    lengths = paddle.tensor([len(s) for s in seqs])
    # hand fix: Paddle has no pad_sequence; each sequence padded with 0 to the longest
    width = max(len(s) for s in seqs)
    padded = paddle.stack([paddle.nn.functional.pad(s, [0, width - len(s)], value=0) for s in seqs])
    return padded, lengths, paddle.tensor(labels)


def make_loader(sequences, labels, batch_size=4):
    return paddle.io.DataLoader(
        dataset=TextDataset(sequences, labels),
        batch_size=batch_size,
        shuffle=False,
        collate_fn=collate,
    )


class RNNClassifier(paddle.nn.Module):
    def __init__(
        self,
        vocab_size=50,
        embed_dim=16,
        hidden_dim=24,
        num_classes=3,
        rnn_type="lstm",
        num_layers=1,
        pad_idx=0,
    ):
        super().__init__()
        self.embedding = paddle.nn.Embedding(vocab_size, embed_dim, padding_idx=pad_idx)
        rnn = paddle.nn.LSTM if rnn_type == "lstm" else paddle.nn.GRU
        self.rnn = rnn(
            embed_dim,
            hidden_dim,
            num_layers=num_layers,
            time_major=False,  # hand fix: Paddle's keywords for torch's batch_first=True
            direction="bidirect",  # hand fix: and bidirectional=True
        )
        self.fc = paddle.compat.nn.Linear(2 * hidden_dim, num_classes)

    def forward(self, text, lengths):
        embedded = self.embedding(text)
        # hand fix: Paddle's RNNs take the lengths themselves (no packing); their outputs stay padded, zero past
        # each sequence's length
        out, _ = self.rnn(embedded, sequence_length=lengths)
        mask = (paddle.arange(out.size(1))[None, :] < lengths[:, None]).unsqueeze(-1)
        # hand fix: Paddle multiplies no float by a bool, nor divides a float by an int
        pooled = (out * mask.astype(out.dtype)).sum(dim=1) / lengths[:, None].astype(out.dtype)
        return self.fc(pooled)
