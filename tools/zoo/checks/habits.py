"""Habits many library models share, each in a small token model of the zoo's own making, written once per
framework: the pair a case names `habit` builds (cases.py's HABITS)."""
import numpy as np
import paddle
import torch


def habit(config):
    """A token model with one habit many library models share (config["habit"]), written once per framework:
    float64 overflow (a mask scaled by finfo(dtype).min in a float32 tensor, then a LayerNorm), integer
    computations (relative position buckets computed with integer ops feeding an embedding), a buffer one side
    keeps (Paddle's position_ids, torch's computed; paddle_position_start: its first id), a tied embedding (one
    module used by both halves), a flattened batch (Paddle's feed-forward on [batch*seq, hidden]), subclassed
    embeddings (learned positions, classes of another name) and a config difference (token-type embeddings,
    paddle_type_vocab_size rows on the Paddle side)."""
    kind = config["habit"]

    def make(side):
        nn = torch.nn if side == "torch" else paddle.nn
        fw = torch if side == "torch" else paddle
        base = torch.nn.Module if side == "torch" else paddle.nn.Layer

        class Positions(nn.Embedding):  # a learned position embedding, subclassed on both sides
            def forward(self, ids):
                return super().forward(fw.arange(ids.shape[1]).unsqueeze(0))
        Positions.__name__ = "LearnedPositionalEmbedding" if side == "torch" else "LearnedPositionEmbedding"

        class Half(base):
            def __init__(self, embed):
                super().__init__()
                self.embed_tokens, self.fc1, self.fc2 = embed, nn.Linear(16, 32), nn.Linear(32, 16)

            def forward(self, ids, h=None):
                x = self.embed_tokens(ids) + (0 if h is None else h)
                if kind == "flattened batches" and side == "paddle":
                    b, s, d = x.shape
                    return x + self.fc2(fw.tanh(self.fc1(x.reshape([b * s, d])))).reshape([b, s, d])
                return x + self.fc2(fw.tanh(self.fc1(x)))

        class Net(base):
            def __init__(self):
                super().__init__()
                self.shared = nn.Embedding(50, 16)
                self.encoder = Half(self.shared)
                self.decoder = Half(self.shared if kind == "tied embeddings" else nn.Embedding(50, 16))
                self.positions = (Positions if kind == "subclassed embeddings" else nn.Embedding)(32, 16)
                if kind == "buffer one side keeps" and side == "paddle":  # paddlenlp's habit: saved with the weights
                    start = config.get("paddle_position_start", 0)
                    self.register_buffer("position_ids", (paddle.arange(32) + start).clip(max=31).unsqueeze(0))
                if kind == "config difference":  # paddlenlp's default type_vocab_size is 16, BERT's config says 2
                    self.token_type = nn.Embedding(config.get("paddle_type_vocab_size", 2) if side == "paddle" else 2,
                                                   16)
                if kind == "float64 overflow":
                    self.norm = nn.LayerNorm(16)
                self.query = nn.Linear(16, 16)
                self.buckets = nn.Embedding(8, 1)
                self.head = nn.Linear(16, 4)

            def forward(self, input_ids, attention_mask):
                n = input_ids.shape[1]
                if kind == "subclassed embeddings":
                    at = self.positions(input_ids)
                elif hasattr(self, "position_ids"):
                    at = self.positions(self.position_ids[:, :n])
                else:
                    at = self.positions(fw.arange(n).unsqueeze(0))
                if kind == "config difference":
                    at = at + self.token_type(fw.zeros_like(input_ids))
                h = self.encoder(input_ids, at)
                scores = fw.matmul(self.query(h), h.transpose([0, 2, 1]) if side == "paddle" else h.transpose(1, 2))
                if kind == "integer computations":
                    pos = fw.arange(n)
                    rel = pos.unsqueeze(0) - pos.unsqueeze(1)
                    width = config.get("paddle_bucket_width", 2) if side == "paddle" else 2
                    bucket = fw.clip(fw.abs(rel) // width, max=7) if side == "paddle" else \
                        fw.clamp(rel.abs() // width, max=7)
                    scores = scores + self.buckets(bucket).squeeze(-1)
                mask = attention_mask.unsqueeze(1)
                mask = mask.to(torch.float32) if side == "torch" else mask.astype("float32")
                big = -1e4  # a fixed mask value, as BERT's original code writes it
                if kind == "float64 overflow":  # transformers' habit; in a float64 run, finfo(float64).min in float32
                    big = (torch.finfo(h.dtype) if side == "torch" else paddle.finfo(h.dtype)).min
                scores = scores + (1.0 - mask) * big
                attn = nn.functional.softmax(scores, -1)
                mixed = fw.matmul(attn, h)
                return self.head(self.decoder(input_ids, self.norm(mixed) if kind == "float64 overflow" else mixed))
        return Net()
    rng = np.random.RandomState(0)
    ids = rng.randint(1, 50, (2, 10)).astype("int64")
    mask = np.ones((2, 10), "int64")
    mask[1, 7:] = 0  # the second sequence padded
    return make("torch"), make("paddle"), {"input_ids": ids, "attention_mask": mask}, None
