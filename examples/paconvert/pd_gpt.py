import paddle

"""A tiny GPT in nanoGPT's style (model.py): causal self-attention through F.scaled_dot_product_attention, a GELU
MLP, pre-norm blocks with stochastic depth (timm's DropPath, copied in), tied token embedding and LM head."""
import math
from dataclasses import dataclass

# hand fix: PaConvert's helper here replaced paddle.Tensor.split with torch's meaning in the whole process (every
# other library's x.split(n) too); paddle.compat.split below is torch's split, for this call alone

def drop_path(
    x, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True
):
    """Drop paths (Stochastic Depth) per sample (when applied in main path of residual blocks). From timm."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(p=keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor = random_tensor / keep_prob  # hand fix: Paddle's div_ takes a tensor, not a float
    return x * random_tensor


class DropPath(paddle.nn.Module):
    """Drop paths (Stochastic Depth) per sample (when applied in main path of residual blocks). From timm."""

    def __init__(self, drop_prob: float = 0.0, scale_by_keep: bool = True):
        super(DropPath, self).__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)


class CausalSelfAttention(paddle.nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = paddle.compat.nn.Linear(
            config.n_embd, 3 * config.n_embd, bias=config.bias
        )
        self.c_proj = paddle.compat.nn.Linear(
            config.n_embd, config.n_embd, bias=config.bias
        )
        self.resid_dropout = paddle.nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = paddle.compat.split(self.c_attn(x), self.n_embd, dim=2)  # hand fix: torch's split
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = paddle.compat.nn.functional.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=None,
            dropout_p=self.dropout if self.training else 0,
            is_causal=True,
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))
        return y


class MLP(paddle.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = paddle.compat.nn.Linear(
            config.n_embd, 4 * config.n_embd, bias=config.bias
        )
        self.gelu = paddle.nn.GELU()
        self.c_proj = paddle.compat.nn.Linear(
            4 * config.n_embd, config.n_embd, bias=config.bias
        )
        self.dropout = paddle.nn.Dropout(config.dropout)

    def forward(self, x):
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x


class Block(paddle.nn.Module):
    def __init__(self, config, drop_path=0.0):
        super().__init__()
        self.ln_1 = paddle.nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = paddle.nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)
        self.drop_path = (
            DropPath(drop_path) if drop_path > 0.0 else paddle.nn.Identity()
        )

    def forward(self, x):
        x = x + self.drop_path(self.attn(self.ln_1(x)))
        x = x + self.drop_path(self.mlp(self.ln_2(x)))
        return x


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 96
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 32
    dropout: float = 0.0
    drop_path: float = 0.1
    bias: bool = True


class GPT(paddle.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = paddle.nn.ModuleDict(
            dict(
                wte=paddle.nn.Embedding(config.vocab_size, config.n_embd),
                wpe=paddle.nn.Embedding(config.block_size, config.n_embd),
                drop=paddle.nn.Dropout(config.dropout),
                h=paddle.nn.ModuleList(
                    [Block(config, config.drop_path) for _ in range(config.n_layer)]
                ),
                ln_f=paddle.nn.LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = paddle.compat.nn.Linear(
            config.n_embd, config.vocab_size, bias=False
        )
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                paddle.nn.init.normal_(
                    p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer)
                )

    def _init_weights(self, module):
        if isinstance(module, paddle.compat.nn.Linear):
            paddle.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                paddle.nn.init.zeros_(module.bias)
        elif isinstance(module, paddle.nn.Embedding):
            paddle.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        device = idx.device
        b, t = idx.size()
        assert (
            t <= self.config.block_size
        ), f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"
        pos = paddle.arange(0, t, dtype=paddle.long, device=device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        return self.lm_head(x)