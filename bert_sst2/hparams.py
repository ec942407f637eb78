"""Hyperparameters both frameworks share (Steps 4 and 5 read them from here, never inline)."""

LEARNING_RATE = 3e-5
WEIGHT_DECAY = 0.01
ADAM_EPSILON = 1e-6          # torch's AdamW defaults to 1e-8, Paddle's to 1e-8 too; BERT uses 1e-6
ADAM_BETAS = (0.9, 0.999)
BATCH_SIZE = 32
MAX_SEQ_LENGTH = 128
SEED = 2021                # every seeded draw: fake data, head, random init, data order, shared masks
# The exported checkpoints are uncased (MiniLM's and bert-base-uncased's tokenizer_config.json say
# do_lower_case: true); a cased tokenizer on an uncased vocab maps capitals to [UNK] or other wordpieces.
DO_LOWER_CASE = True
WARMUP_PROPORTION = 0.1    # Step 5: linear warmup over the first 10% of steps

# Step 4's scheduler comparison (the guide's figures)
SCHED_WARMUP_STEPS = 345
SCHED_TOTAL_STEPS = 1024
SCHED_POLY_POWER = 1.0
SCHED_POLY_END_LR = 0.0


def decays(param_name: str) -> bool:
    """BERT's rule: no weight decay on biases and LayerNorm parameters."""
    return not (param_name.endswith("bias") or "LayerNorm" in param_name)
