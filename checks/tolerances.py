"""Every tolerance the checks apply, in one place, with the measurement behind it.

A key passes when both hold:

* the rule, as torch.testing.assert_close and numpy.allclose state it:
  max |torch - paddle| <= atol + rtol * scale, where scale is max |torch| over the whole
  tensor. Not element-wise: fp32 rounding in a matmul or a sum is relative to the size of
  the terms, not of each result, so an entry that cancels to near zero carries the same
  absolute error as its large neighbours; element-wise, it would need an atol as large as
  those neighbours, a hand-tuned absolute figure again. The tensor's largest value is the
  size of its terms, and it grows with the model, so the bound grows with it;
* the guide's bound on the mean abs diff (MEAN_BOUND, 1e-6 in Steps 1-4; 0.15% on Step 5's
  accuracy), which no rule may loosen.

rtol is set 2-4x above the largest relative diff of correct code at any measured size (the
tests' tiny model, MiniLM, bert-base size with random weights) and below the smallest planted
bug; atol covers what does not scale with the values: values zero in exact arithmetic, drift over
steps. The step READMEs have the runs, with their commands.
"""
import math
from typing import NamedTuple, Optional

from common import keys
from common.errors import PipelineError

# The guide's bound on the mean abs diff of every compared key in Steps 1-4.
MEAN_BOUND = 1e-6


class Tol(NamedTuple):
    """max abs diff <= atol + rtol * max |torch|, and mean abs diff <= mean (None: no mean bound)."""
    atol: float
    rtol: float
    mean: Optional[float] = MEAN_BOUND

    @classmethod
    def absolute(cls, threshold: float) -> "Tol":
        """reprod_log's own rule: max and mean abs diff both under one threshold."""
        return cls(threshold, 0.0, threshold)


# Step 2 and Step 4's lr: ids, batches and accuracies are integers or exact ratios, and both sides
# evaluate the same Python double expressions for every lr: nothing may differ.
EXACT = Tol(0.0, 0.0, None)
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
ACCURACY = Tol(atol=0.0015, rtol=0.0, mean=0.0015)
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
    "forward": Pair({}, LOGITS, 1e-6),
    "data": Pair({}, EXACT, 1e-6),
    "metric": Pair({"model_logits": LOGITS}, EXACT, 1e-6),
    "loss": Pair({}, LOSS, 1e-6),
    "lr": Pair({}, LR, 1e-6),
    "bp_align": Pair({keys.STEP_LOSS.pattern: BP_LOSS, keys.GRAD.pattern: BP_GRAD, keys.UPDATE.pattern: BP_UPDATE},
                     EXACT, 1e-2),
    "train_align": Pair({"acc*": ACCURACY, "lr": LR, **{key: TRAIN_LOSS for key in keys.TRAIN_LOSS.values()}},
                        EXACT, 0.0015),
}


def from_flags(tol: Tol, what: str, loosened: list, atol=None, rtol=None, atol_flag="--threshold",
               rtol_flag="--rtol", mean_too=False) -> Tol:
    """`tol` with a check's command-line flags applied. Each must be a finite number >= 0 (else one line,
    before anything is written, as check_pair.py does); each that loosens the measured figure is appended
    to `loosened` (CheckResult.loosened), which the diff log, the verdict, SUMMARY.md and
    check_log_reprod.py state. mean_too: the flag sets the mean bound as well (a single number's)."""
    new = tol
    for flag, field, value in ((atol_flag, "atol", atol), (rtol_flag, "rtol", rtol)):
        if value is None:
            continue
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise PipelineError(f"{flag} must be a finite number >= 0, got {value}")
        new = new._replace(**{field: float(value)}, **({"mean": float(value)} if mean_too and field == "atol" else {}))
        if value > getattr(tol, field):
            loosened.append(f"{flag} {value:g} loosens {what}'s {field} (measured: {getattr(tol, field):g})")
    return new
