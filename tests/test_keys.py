"""The key families (bert_sst2/keys.py) that the pt/pd scripts write and the checks read."""
import numpy as np

from bert_sst2 import data, keys, tolerances


def test_batches_are_counted_past_999():
    """check_step2 counted batches by slicing 'batch_000' off each key: batch_1000 and batch_1001 were one.
    A data set of 1,002 batches of one example each must count 1,002."""
    examples = [{"input_ids": [1], "token_type_ids": [0], "label": 0}] * 1002
    batches = ({"input_ids": np.array([[1]])} for _ in range(1002))
    assert keys.BATCH.count(data.record(examples, batches)) == 1002
    assert keys.BATCH.key(1000, "labels") == "batch_1000_labels" and keys.BATCH.index("batch_1000_labels") == 1000


def test_step_losses_keep_numeric_order():
    names = [keys.STEP_LOSS.key(i) for i in (100, 2, 10, 0)]
    assert keys.STEP_LOSS.ordered(names + ["lr"]) == ["loss_00", "loss_02", "loss_10", "loss_100"]


def test_tolerances_judge_the_families_the_writers_write():
    bp = tolerances.PAIRS["bp_align"].tolerances
    assert set(bp) == {f.pattern for f in keys.BP_FAMILIES}
    assert set(keys.TRAIN_LOSS.values()) <= set(tolerances.PAIRS["train_align"].tolerances)
