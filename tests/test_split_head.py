"""A Paddle model in tensor parallel whose head keeps each rank's columns of the vocabulary (paddlenlp's default,
tensor_parallel_output=True), trained with fleet's ParallelCrossEntropy, against torch's whole model and its
cross entropy (portcheck.gradients.split_steps.compare_split_steps): the model's output joined in the steps as the
forward joins it, the parallel cross entropy run on CPU by its stand-in (portcheck.parallel.standins). One launch of
two ranks: the clean port and two plants (tests/split_pairs.py), each trained two steps."""
import multiprocessing

import pytest

from portcheck.gradients import split_steps

import split_pairs as pairs
from examples import tiny_llama_split as pair

STEPS = 2


@pytest.fixture(scope="module")
def reports():
    torch_model, state = pair.torch_and_state()
    # the loss plant sets how its rank's loss averages: the launch's last run, so no run after it reads it
    plants = {"head_grad_doubled_on_rank_1": pairs.head_grad_doubled_on_rank_1,
              "mean_counts_ignored": pairs.mean_counts_ignored}
    forward, backward = split_steps.compare_split_steps(
        torch_model, pairs.build_vocab_parallel, pair.IDS, pairs.HEAD_TARGETS,
        (pairs.torch_kept_loss, pairs.paddle_parallel_loss), (pairs.torch_sgd, pairs.paddle_sgd), 2, state, STEPS,
        plants)
    assert multiprocessing.active_children() == []
    return forward, backward


def test_a_head_keeping_each_ranks_columns_is_joined_in_the_steps_and_its_parallel_loss_runs_on_cpu(reports):
    """Each rank's output is its 32 of the vocabulary's 64 columns: joined in the steps' first forward as in the
    forward's, so the model's own output is judged whole; ParallelCrossEntropy (no CPU kernel) runs by its
    stand-in, the ignored tokens (-100) left out as torch leaves them: green, every gradient and step."""
    forward, backward = reports
    assert forward[None].passed, forward[None].table()
    report = backward[None]
    assert report.passed and report.ranks == {} and report.first_diverging is None, report.table()
    logits = next(r for r in report.forward.rows if r.name == "(model):logits")
    assert logits.judged and logits.passed and tuple(logits.shape) == (2, 16, 64), report.table()
    assert "grad lm_head.weight" in {r.name for r in report.grads} and len(report.steps) == STEPS
    assert "c_split and c_softmax_with_cross_entropy (no CPU kernel) stood in for" in report.table()
    assert (pairs.HEAD_TARGETS == -100).sum() == 6


def test_a_head_gradient_wrong_on_one_rank_is_red_at_the_head_on_that_rank(reports):
    forward, backward = reports
    assert forward["head_grad_doubled_on_rank_1"].passed  # its forward is the clean one
    report = backward["head_grad_doubled_on_rank_1"]
    assert not report.passed and report.first_diverging == "grad lm_head.weight" and report.parted() == [1], \
        report.table()


def test_a_parallel_loss_averaged_over_the_ignored_tokens_too_is_red_at_the_loss(reports):
    """The port's mean counts the tokens its ParallelCrossEntropy ignores (each 0): its loss red at step 1, then
    every gradient from the head's back, on every rank (each holds the same loss)."""
    forward, backward = reports
    assert forward["mean_counts_ignored"].passed
    report = backward["mean_counts_ignored"]
    loss = next(r for r in report.steps[0] if r.name == "loss")
    assert not report.passed and not loss.passed and report.first_diverging == "loss after step 1", report.table()
    assert report.first_diverging_gradient == "grad lm_head.weight" and report.parted() == [0, 1], report.table()
