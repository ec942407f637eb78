"""BertConfig, read from a Hugging Face checkpoint's config.json, shared by both twins.

The twins' configuration_bert.py, as Hugging Face keeps it beside modeling_bert.py. A config that
cannot build the model it describes raises ValueError naming every bad field; so does a vocab.txt
the two tokenizers cannot both use. The caller says what to do about it.
"""
import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

HIDDEN_ACTS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu")  # the twins' ACT2FN, both sides
# What both tokenizers (transformers' and paddlenlp's BertTokenizer) need to encode a batch: [CLS] and [SEP]
# frame every sentence, [UNK] replaces unknown words, [PAD] fills batches. ([MASK] is for pretraining: both
# encode without it.)
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[UNK]", "[PAD]")
# bert-large has 0.34e9 parameters; a config far above that is a typo that would exhaust memory
MAX_PARAMETERS = 2 * 10 ** 9


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    position_embedding_type: str = "absolute"
    num_labels: int = 2

    def __post_init__(self):
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))

    def problems(self) -> list:
        """Every field that cannot build the model, as a phrase each (empty when the config is usable)."""
        out = []
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                     "max_position_embeddings", "type_vocab_size", "num_labels", "pad_token_id"):
            value = getattr(self, name)
            low = {"num_labels": 2, "pad_token_id": 0}.get(name, 1)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                out.append(f"{name} must be an integer >= {low}, got {value!r}")
        for name, ok, rule in (("hidden_dropout_prob", lambda x: 0 <= x < 1, "in [0, 1)"),
                               ("attention_probs_dropout_prob", lambda x: 0 <= x < 1, "in [0, 1)"),
                               ("initializer_range", lambda x: x >= 0, ">= 0"),
                               ("layer_norm_eps", lambda x: x > 0, "> 0")):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                    or not ok(value):
                out.append(f"{name} must be a number {rule}, got {value!r}")
        if self.hidden_act not in HIDDEN_ACTS:
            out.append(f"hidden_act {self.hidden_act!r} is not one of {', '.join(HIDDEN_ACTS)}")
        if self.position_embedding_type != "absolute":
            out.append(f"position_embedding_type {self.position_embedding_type!r}: only 'absolute' is implemented")
        if out:
            return out  # the checks below need valid sizes
        if self.hidden_size % self.num_attention_heads:
            out.append(f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
                       f"{self.num_attention_heads}")
        if self.pad_token_id >= self.vocab_size:
            out.append(f"pad_token_id {self.pad_token_id} is not below vocab_size {self.vocab_size}")
        if self.n_parameters() > MAX_PARAMETERS:
            out.append(f"{self.n_parameters():,} parameters, more than {MAX_PARAMETERS:,} (a typo in a size?)")
        return out

    def n_parameters(self) -> int:
        h, i = self.hidden_size, self.intermediate_size
        embeddings = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size + 2) * h
        layer = 4 * (h * h + h) + 2 * h * i + i + h + 4 * h
        return embeddings + self.num_hidden_layers * layer + h * h + h + (h + 1) * self.num_labels

    @classmethod
    def from_json(cls, path) -> "BertConfig":
        try:
            raw = json.loads(Path(path).read_text())
            known = {f.name for f in fields(cls)}
            # Unknown keys (architectures, transformers_version, ...) do not change the math.
            return cls(**{k: v for k, v in raw.items() if k in known})
        except (ValueError, TypeError, AttributeError, OSError, RecursionError) as e:
            raise ValueError(f"{path}: not a usable BERT config ({e})") from None

    def to_json(self, path):
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")


def read_vocab(path, config: BertConfig) -> list:
    """vocab.txt's tokens (line n is id n), checked: not empty, no more tokens than the embedding has rows,
    every SPECIAL_TOKENS present. (A token listed twice is not refused: both tokenizers give it the later id.)"""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a readable vocab.txt ({e})") from None
    # as both tokenizers read it: universal newlines, one token per line without its "\n" (not splitlines(),
    # which also splits at characters such as \x1c or \u2028 that a token may hold)
    tokens = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []
    problems = []
    if not tokens:
        problems.append("it is empty")
    elif len(tokens) > config.vocab_size:
        problems.append(f"it has {len(tokens)} tokens, the model's vocab_size is {config.vocab_size}")
    missing = [t for t in SPECIAL_TOKENS if t not in tokens]
    if tokens and missing:
        problems.append(f"{', '.join(missing)} missing (both tokenizers need {', '.join(SPECIAL_TOKENS)})")
    if problems:
        raise ValueError(f"{path}: not a usable BERT vocabulary: {'; '.join(problems)}")
    return tokens
