"""Every tolerance BERT's step checks apply, tuned on BERT, with the measurement behind it.

The rule (portcheck.tolerances.Tol): max |torch - paddle| <= atol + rtol * max |torch|, and the
mean within the guide's bound. rtol is set 2-4x above the largest relative diff of correct code at
any measured size (the tests' tiny model, MiniLM, bert-base size with random weights) and below the
smallest planted bug; atol covers what does not scale with the values: values zero in exact
arithmetic, drift over steps. The step READMEs have the runs, with their commands. The guide's own
thresholds are the library's one table (portcheck.tolerances.GUIDE).
"""
from typing import NamedTuple

from bert_sst2 import keys
from portcheck.core.tolerances import EXACT, GUIDE, MEAN_BOUND, Tol, from_flags  # noqa: F401 (the checks' one import)

# Step 2 and Step 4's lr: ids, batches and accuracies are integers or exact ratios, and both sides
# evaluate the same Python double expressions for every lr: nothing may differ.
LR = EXACT
# Step 1, the logits. Clean relative diff: 4.9e-7 tiny, 1.0e-6 MiniLM, 2.8e-6 bert-base size (random
# weights' logits are small, 0.11, beside hidden states of ~5, whose rounding they inherit). Smallest
# planted bug: Paddle's LayerNorm epsilon 1e-5 (MiniLM: 6.2e-6 abs on logits of 0.03, relative 2e-4).
LOGITS = Tol(atol=1e-7, rtol=1e-5)
# Step 1, every watched module's output (hidden states up to ~30 in MiniLM, so absolute diffs reach
# 1e-5 on correct code). Clean relative diff <= 5.9e-7 tiny, 2.5e-6 MiniLM, 2.8e-6 bert-base size; a
# wrong epsilon in one LayerNorm of layer 3 shows at 2.0e-5 relative there (and 4.6e-6 mean: over
# MEAN_BOUND too).
MODULE_OUTPUTS = LOGITS
# Step 3: the mean cross-entropy of the fake batch, a single number of ~0.7, held to the logits' rtol
# (the loss inherits their relative rounding). Clean: 0 on the tiny model and MiniLM, 6e-8 at bert-base
# size; label smoothing moves MiniLM's by 4.2e-4, a summed loss by 2.1.
LOSS = Tol(atol=1e-7, rtol=1e-5)
# Step 4, loss_NN: the loss after each AdamW step. fp32 drift accumulates over the steps (a float64
# pair agrees to 6e-14, so it is rounding, not a different update rule) and it comes from the weights'
# rounding, not from the size of the current loss: at bert-base size the loss falls from 0.72 to 0.0017
# in 10 steps while the diff it carried stays (2.3e-7 at loss_04 = 0.037). So atol takes the drift
# (MiniLM reaches 5.7e-7 by loss_09, bert-base 4.6e-7 by loss_02) and the guide's mean bound, which
# for a single number bounds its max too, caps it at 1e-6.
BP_LOSS = Tol(atol=5e-7, rtol=5e-6)
# Step 4, grad_*: every gradient after the first backward. A weight's gradient is a sum over the
# batch's 256 tokens of terms larger than the sum, so its rounding is relative to those terms: clean
# code differs by up to 8.4e-6 of the largest entry on MiniLM (the embeddings' LayerNorm weight) and
# 8.5e-6 at bert-base size (the classifier bias). atol is for the key biases, whose gradient is zero in
# exact arithmetic (softmax ignores a shift shared by all keys) and rounding noise in fp32: 8.5e-11 on
# MiniLM, 7.6e-10 at bert-base size. A wrong LayerNorm epsilon in layer 3 alone moves MiniLM's gradients
# by up to 5.6e-5 of their size; a 1.01 scale in the backward pass by 1e-2.
BP_GRAD = Tol(atol=5e-9, rtol=2e-5)
# Step 4, update_*: [mean, mean |.|] of each parameter's total change over the iterations (mean |.|
# ~2e-4 after 10 steps at lr 3e-5). The updates inherit the rounding of the weights themselves (fp32
# spacing ~7e-9 at |w| 0.1), averaged over the tensor: clean <= 1.2e-9 abs on MiniLM, 5.3e-9 on the
# tiny model; hence atol, not rtol, covers it. Weight decay on LayerNorm and bias makes 2.1e-6 (1e-2
# relative); AdamW's epsilon 1e-8 instead of 1e-6 moves the query weights more.
BP_UPDATE = Tol(atol=2e-8, rtol=1e-4)
# Step 5: dev accuracy, the guide's 0.15% for SST-2 (one dev sentence is 1/872 = 0.00115); the
# mean bound is the same guide figure (a single number: its mean is its max).
ACCURACY = Tol.absolute(GUIDE["train_align"].threshold)
# Step 5, the loss at every step when both sides train alike (no dropout, or shared masks): fp32
# drift grows over steps (reference run, shared dropout: 1.1e-5 at most over 2,105 MiniLM steps);
# a wrong data order, mask or update differs by ~1e-1 within a few steps. No guide bound here.
TRAIN_LOSS = Tol(atol=1e-3, rtol=0.0, mean=None)


class Pair(NamedTuple):
    """How one of the guide's pairs is judged: per-key tolerances (fnmatch patterns, first match wins),
    the default for other keys, and the single threshold the guide's own ReprodDiffHelper call uses."""
    tolerances: dict
    default: Tol
    guide: float


# Every check_stepN.py and pipeline/check_log_reprod.py judge the pairs by this table (command-line
# flags of the checks may override a family's atol/rtol).
PAIRS = {
    "forward": Pair({}, LOGITS, GUIDE["forward"].threshold),
    "data": Pair({}, EXACT, GUIDE["data"].threshold),
    "metric": Pair({"model_logits": LOGITS}, EXACT, GUIDE["metric"].threshold),
    "loss": Pair({}, LOSS, GUIDE["loss"].threshold),
    "lr": Pair({}, LR, GUIDE["lr"].threshold),
    "bp_align": Pair({keys.STEP_LOSS.pattern: BP_LOSS, keys.GRAD.pattern: BP_GRAD, keys.UPDATE.pattern: BP_UPDATE},
                     EXACT, GUIDE["bp_align"].threshold),
    "train_align": Pair({"acc*": ACCURACY, "lr": LR, **{key: TRAIN_LOSS for key in keys.TRAIN_LOSS.values()}},
                        EXACT, GUIDE["train_align"].threshold),
}


