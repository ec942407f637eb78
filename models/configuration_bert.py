"""BertConfig, read from a Hugging Face checkpoint's config.json, shared by both twins.

The twins' configuration_bert.py, as Hugging Face keeps it beside modeling_bert.py. A config that
cannot build a model raises ValueError; the caller says what to do about it.
"""
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path


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
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of "
                             f"num_attention_heads {self.num_attention_heads}")
        if self.position_embedding_type != "absolute":
            raise ValueError(f"position_embedding_type {self.position_embedding_type!r}: "
                             "only 'absolute' is implemented")

    @classmethod
    def from_json(cls, path) -> "BertConfig":
        try:
            raw = json.loads(Path(path).read_text())
            known = {f.name for f in fields(cls)}
            # Unknown keys (architectures, transformers_version, ...) do not change the math.
            return cls(**{k: v for k, v in raw.items() if k in known})
        except (ValueError, TypeError, AttributeError, OSError) as e:
            raise ValueError(f"{path}: not a usable BERT config ({e})") from None

    def to_json(self, path):
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")
