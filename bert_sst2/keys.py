"""The key families of the result files, named once: the pt/pd scripts write keys through these, and the
checks and tolerances read them back through the same objects, never by slicing key strings."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """Keys `<prefix><index or name>[_<field>]`: an indexed family (Step 2's batches, Step 4's losses) keeps
    numeric order past any width (batch_1000 after batch_999), which string order would not."""
    prefix: str
    width: int = 0  # digits of an indexed family's index; 0: the family is keyed by a name

    def key(self, index_or_name, field: str = "") -> str:
        part = f"{index_or_name:0{self.width}d}" if self.width else str(index_or_name)
        return f"{self.prefix}{part}" + (f"_{field}" if field else "")

    @property
    def pattern(self) -> str:
        """The fnmatch pattern tolerances and diff.select take."""
        return f"{self.prefix}*"

    def owns(self, key: str) -> bool:
        return key.startswith(self.prefix)

    def index(self, key: str) -> int:
        """The index of an indexed family's key (batch_012_input_ids -> 12)."""
        return int(key[len(self.prefix):].split("_", 1)[0])

    def name(self, key: str) -> str:
        """The name of a named family's key (grad_bert.pooler.dense.weight -> bert.pooler.dense.weight)."""
        return key[len(self.prefix):]

    def count(self, keys) -> int:
        """How many distinct indices the keys of this family hold (Step 2: the number of batches)."""
        return len({self.index(k) for k in keys if self.owns(k)})

    def ordered(self, keys) -> list:
        """This family's keys, an indexed family's in numeric order."""
        mine = [k for k in keys if self.owns(k)]
        return sorted(mine, key=self.index) if self.width else mine


EXAMPLE = Family("example_", width=5)  # Step 2: example_<index>_<field> (input_ids, token_type_ids, label)
BATCH = Family("batch_", width=3)   # Step 2: batch_<index>_<field> (input_ids, token_type_ids, attention_mask, labels)
STEP_LOSS = Family("loss_", width=2)  # Step 4: loss_<iteration>, the loss before each optimizer step (loss_00 first)
GRAD = Family("grad_")              # Step 4: grad_<parameter>, every gradient after the first backward
UPDATE = Family("update_")          # Step 4: update_<parameter>, [mean, mean |.|] of its total change
BP_FAMILIES = (STEP_LOSS, GRAD, UPDATE)
HAND_IN_BP = (STEP_LOSS, UPDATE)    # what log_reprod/bp_align_*.npy holds; gradients go in as statistics

# Step 5: the per-step loss in train_align, keyed by the dropout mode that makes it comparable step by step;
# a deterministic run compared with a shared-dropout one is then a key mismatch, not a pass.
TRAIN_LOSS = {"deterministic": "loss", "shared_dropout": "loss_shared_dropout"}
