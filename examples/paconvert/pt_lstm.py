"""An LSTM (or GRU) text classifier as sentiment repositories write it: padded batches from a collate function,
the embeddings packed by length into a bidirectional RNN chosen by name, its outputs unpacked and mean-pooled over
the real tokens, a Linear head."""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.data import DataLoader, Dataset


class TextDataset(Dataset):
    def __init__(self, sequences, labels):
        self.sequences = sequences
        self.labels = labels

    def __len__(self):
        return len(self.sequences)

    def __getitem__(self, idx):
        return torch.tensor(self.sequences[idx]), self.labels[idx]


def collate(batch):
    seqs, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])
    padded = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=0)
    return padded, lengths, torch.tensor(labels)


def make_loader(sequences, labels, batch_size=4):
    return DataLoader(TextDataset(sequences, labels), batch_size=batch_size, shuffle=False, collate_fn=collate)


class RNNClassifier(nn.Module):
    def __init__(self, vocab_size=50, embed_dim=16, hidden_dim=24, num_classes=3, rnn_type="lstm",
                 num_layers=1, pad_idx=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_idx)
        rnn = nn.LSTM if rnn_type == "lstm" else nn.GRU
        self.rnn = rnn(embed_dim, hidden_dim, num_layers=num_layers, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden_dim, num_classes)

    def forward(self, text, lengths):
        embedded = self.embedding(text)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(packed_out, batch_first=True)
        mask = (torch.arange(out.size(1))[None, :] < lengths[:, None]).unsqueeze(-1)
        pooled = (out * mask).sum(dim=1) / lengths[:, None]
        return self.fc(pooled)
