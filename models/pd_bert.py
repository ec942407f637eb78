"""A simplified BERT in Paddle, the twin of models/pt_bert.py.

Same classes, same attributes, same order as the PyTorch file; parameter names
equal the Hugging Face checkpoint keys. One layout difference is Paddle's own:
nn.Linear stores its weight as [in, out], the transpose of torch's [out, in]
(weights/torch2paddle.py handles that).
"""
import math

import paddle
from paddle import nn
from paddle.nn import functional as F

from .configuration_bert import BertConfig

ACT2FN = {
    "gelu": lambda x: F.gelu(x),
    "gelu_new": lambda x: F.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate=True),
    "relu": F.relu,
    "silu": F.silu,
}


class Linear(nn.Linear):
    """nn.Linear computed the way torch's is: one addmm on the 2-D view, bias inside the GEMM.

    Same parameters and names as nn.Linear (weight [in, out], bias [out]), so checkpoints load
    unchanged. Only Paddle needs it (pt_bert.Linear is plain nn.Linear): Paddle's linear on a
    [batch, seq, in] input is a matmul followed by a separate broadcast bias add, whose forward and
    backward (a column reduction for the bias gradient) are slow single-threaded kernels on CPU;
    addmm folds the bias into the GEMM, as torch's nn.Linear does (docs/bench/speed.md has the numbers).
    """

    def forward(self, x):
        if self.bias is None:
            return super().forward(x)
        if x.ndim == 2:
            return paddle.addmm(self.bias, x, self.weight)
        out = paddle.addmm(self.bias, x.reshape([-1, x.shape[-1]]), self.weight)
        return out.reshape(x.shape[:-1] + [self.weight.shape[1]])


class Dropout(nn.Dropout):
    """nn.Dropout, unless a shared MaskStream is set (set_dropout_stream): then the keep-mask comes from
    that stream, which pt_bert draws from in the same order, so both frameworks drop the same units."""

    stream = None

    def forward(self, x):
        if self.stream is None or not self.training or self.p == 0:
            return super().forward(x)
        mask = self.stream.draw(x.shape, self.p)  # 0 or 1/(1-p), shaped like x
        return x * paddle.to_tensor(mask)


def set_dropout_stream(model: nn.Layer, stream):
    """Route every dropout layer of `model` to `stream` (any object with draw(shape, p), e.g. bert_sst2.shared_dropout.MaskStream); None restores
    the framework's own dropout."""
    for module in model.sublayers():
        if isinstance(module, Dropout):
            module.stream = stream


class BertEmbeddings(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        # No padding_idx: Paddle's padding_idx zeroes the looked-up vector while torch's only
        # freezes its gradient, so the twins would differ. Masked positions get no gradient anyway.
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, epsilon=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids):
        # input_ids, token_type_ids: [batch, seq] -> [batch, seq, hidden]
        position_ids = paddle.arange(input_ids.shape[1], dtype="int64").unsqueeze(0)
        embeddings = (self.word_embeddings(input_ids)
                      + self.token_type_embeddings(token_type_ids)
                      + self.position_embeddings(position_ids))
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.query = Linear(config.hidden_size, config.hidden_size)
        self.key = Linear(config.hidden_size, config.hidden_size)
        self.value = Linear(config.hidden_size, config.hidden_size)
        self.dropout = Dropout(config.attention_probs_dropout_prob)

    def split_heads(self, x):
        # [batch, seq, hidden] -> [batch, heads, seq, head_size]
        batch, seq = x.shape[0], x.shape[1]
        return x.reshape([batch, seq, self.num_attention_heads, self.attention_head_size]).transpose([0, 2, 1, 3])

    def forward(self, hidden_states, attention_mask):
        query = self.split_heads(self.query(hidden_states))
        key = self.split_heads(self.key(hidden_states))
        value = self.split_heads(self.value(hidden_states))
        scores = paddle.matmul(query, key, transpose_y=True) / math.sqrt(self.attention_head_size)
        scores = scores + attention_mask  # [batch, heads, seq, seq] + [batch, 1, 1, seq]
        probs = self.dropout(F.softmax(scores, axis=-1))
        context = paddle.matmul(probs, value).transpose([0, 2, 1, 3])
        return context.reshape([context.shape[0], context.shape[1], -1])  # -> [batch, seq, hidden]


class BertSelfOutput(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, epsilon=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertAttention(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states, attention_mask):
        return self.output(self.self(hidden_states, attention_mask), hidden_states)


class BertIntermediate(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))  # -> [batch, seq, intermediate]


class BertOutput(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, epsilon=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)  # -> [batch, seq, hidden]


class BertLayer(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, attention_mask):
        attention_output = self.attention(hidden_states, attention_mask)
        return self.output(self.intermediate(attention_output), attention_output)


class BertEncoder(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.LayerList([BertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask, output_hidden_states=False):
        all_hidden_states = [hidden_states]
        for layer in self.layer:
            hidden_states = layer(hidden_states, attention_mask)
            all_hidden_states.append(hidden_states)
        return hidden_states, (all_hidden_states if output_hidden_states else None)


class BertPooler(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))  # [CLS] token: -> [batch, hidden]


class BertModel(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_hidden_states=False):
        """Returns (sequence_output [batch, seq, hidden], pooled_output [batch, hidden], hidden_states).

        hidden_states is the embedding output followed by every layer's output when
        output_hidden_states is set, else None.
        """
        if token_type_ids is None:
            token_type_ids = paddle.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = paddle.ones_like(input_ids)
        # 1 = attend, 0 = padding -> additive [batch, 1, 1, seq]: 0 or the most negative float
        extended_mask = (1.0 - attention_mask[:, None, None, :].astype("float32")) * paddle.finfo(paddle.float32).min
        embedding_output = self.embeddings(input_ids, token_type_ids)
        sequence_output, hidden_states = self.encoder(embedding_output, extended_mask, output_hidden_states)
        return sequence_output, self.pooler(sequence_output), hidden_states


class BertForSequenceClassification(nn.Layer):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.bert = BertModel(config)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.classifier = Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        _, pooled_output, _ = self.bert(input_ids, token_type_ids, attention_mask)
        return self.classifier(self.dropout(pooled_output))  # logits: [batch, num_labels]
