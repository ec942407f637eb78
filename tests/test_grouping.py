"""Step 5 --group_by_length: one shared order for both frameworks, batches of similar length, and a
per-framework difference in grouping goes red."""
import numpy as np

from bert_sst2 import data, paths
from conftest import STEP5_PAIR, private_copy, run
from test_step5 import CHECK, PD


def test_grouped_order_is_a_permutation_of_full_batches_of_similar_length():
    rng = np.random.RandomState(0)
    lengths = rng.randint(3, 60, size=1000).tolist()
    order = data.permutation(1000, 5)
    grouped = data.group_by_length(order, lengths, batch_size=32, seed=[5, 0, 1], chunk_batches=4)
    assert sorted(grouped) == list(range(1000))
    batches = [grouped[k:k + 32] for k in range(0, 1000, 32)]
    assert len(batches[-1]) == 1000 % 32 and all(len(b) == 32 for b in batches[:-1])  # the short one stays last
    spread = np.mean([np.ptp([lengths[i] for i in b]) for b in batches[:-1]])
    random_spread = np.mean([np.ptp([lengths[i] for i in order[k:k + 32]]) for k in range(0, 992, 32)])
    assert spread < random_spread / 2
    assert grouped == data.group_by_length(order, lengths, batch_size=32, seed=[5, 0, 1], chunk_batches=4)
    assert grouped != data.group_by_length(order, lengths, batch_size=32, seed=[5, 1, 1], chunk_batches=4)


def test_both_frameworks_see_the_same_lengths(home, monkeypatch):
    monkeypatch.setenv("BERT_ALIGN_HOME", str(home))
    from bert_sst2.twins import pd_data, pt_data
    pt = pt_data.encode(pt_data.load_tsv(paths.DEMO_TSV), pt_data.tokenizer())
    pd = pd_data.encode(pd_data.load_tsv(paths.DEMO_TSV), pd_data.tokenizer())
    assert [len(x) for x in pt["input_ids"]] == [len(x["input_ids"]) for x in pd]


def test_grouped_runs_align_and_a_planted_grouping_difference_is_red(deterministic_pair, tmp_path):
    home = private_copy(deterministic_pair, tmp_path)  # both sides trained with STEP5_PAIR, grouped by length
    run(CHECK, home=home, check=0)
    run(PD, *STEP5_PAIR, home=home, plant="paddle_grouped_batches_unshuffled", check=0)
    proc = run(CHECK, home=home, check=1)
    assert "curves separate" in proc.stdout
