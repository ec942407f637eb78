"""The line saying a weight is within its rule only with the two optimizers' own float32 arithmetic in it
(gradients.optimizers.replayed_lines) is said of a weight within it, never of one over it: an accumulation left out
on one side (its gradients doubled, AdamW's updates then moved by its eps) parts the weights by more than the
replays allow, and those rows are red with no line calling them within."""
import types

from portcheck.core.calibrated import Measured
from portcheck.core.diff import KeyResult
from portcheck.gradients.optimizers import replayed_lines


def weight(diff, optimizers):
    """fc.weight after a step: torch's own error 1e-7 (allowed 8x, the floor ~1e-9 at scale 1e-3)."""
    return KeyResult("fc.weight", Measured(8.0, optimizers=optimizers), (4, 4), max=diff, mean=diff / 2, scale=1e-3,
                     err32=1e-7)


def test_a_weight_within_only_with_the_replays_is_said_one_over_them_is_not():
    within, over, own = weight(1.0e-6, 5e-7), weight(2.4e-5, 5e-7), weight(5e-7, 5e-7)
    assert within.passed and not over.passed and own.passed
    lines = replayed_lines(types.SimpleNamespace(steps=[[within, over, own]]))
    assert lines == [f"training: fc.weight after step 1 differs by 1e-06, within what the two optimizers' own float32 "
                     f"arithmetic makes there (5e-07: each optimizer replayed in float64 on its run's own gradients); "
                     f"torch's own error alone allows {own.rule._replace(optimizers=0.0).allowed(own):.3g}, which no "
                     "port can meet there"], lines
