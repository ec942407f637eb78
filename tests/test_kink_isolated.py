"""A kink Paddle crosses in a later step of compare_backward(isolate=True): each isolated step starts Paddle from
torch's weights, and on a small conv/BatchNorm net of tools/bench_k_backward.py (seed 0, batch 16) Paddle's step 4
forward still puts one BatchNorm output within the floor of 0 on the other side of it (its records alone: 1.3e3 x
the allowance). torch's run taking Paddle's side there, each step from the weights torch's own run left, makes it
green; a momentum plant beside the same kink stays red."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("paddle")
from portcheck import judge_backward  # noqa: E402
from portcheck.gradients import backward  # noqa: E402
from portcheck.gradients.kinks import TAKEN_KEY, TAKING  # noqa: E402

from tools import bench_k_backward as bench  # noqa: E402 - its small conv/BatchNorm nets, shared

SEED, BATCH = 0, 16  # Paddle crosses a kink in step 4's forward of the isolated run (the plain run: none red)
pytestmark = pytest.mark.usefixtures("two_threads")  # the net's kink, found at 2 threads (conftest.two_threads)


def run(monkeypatch, paddle_momentum):
    """compare_backward(isolate=True) on the net; what judged was given (the records) and torch's taking run."""
    seen = {}
    plain = backward.judged

    def judged(t, p, name_map=None, mean_bound=backward.LOSS_MEAN_BOUND, again=None):
        seen.update(t=t, p=p)
        return plain(t, p, name_map, mean_bound, again and (lambda crossed: seen.setdefault("run", again(crossed))))
    monkeypatch.setattr(backward, "judged", judged)
    return bench.kink_compared(SEED, BATCH, (bench.sgd("torch"), bench.sgd("paddle", paddle_momentum)),
                               isolate=True), seen


def test_a_kink_paddle_crosses_in_an_isolated_step_is_green_once_torch_takes_its_side(monkeypatch):
    report, seen = run(monkeypatch, 0.9)
    alone = judge_backward(seen["t"], seen["p"])
    assert not alone.passed and "torch's run taking Paddle's side there is not made" in alone.table(), alone.table()
    assert report.isolated and report.taken and report.passed, report.table()
    assert [(c.step, c.module, len(c.index)) for c in report.crossed] == [(3, "7", 1)], report.crossed
    # each step of the taking run starts from torch's own weights: the steps before the kink are torch's run's bits
    taking = seen["run"]
    before = [k for k in taking if k.startswith(("state1/", "state2/", "state3/")) or k in ("loss/0", "loss/2")]
    assert before and all(np.array_equal(taking[k], seen["t"][k]) for k in before)
    assert any(not np.array_equal(taking[k], seen["t"][k]) for k in taking if k.startswith("state4/"))
    taken = [(i, r) for i, rows in enumerate(report.steps) for r in rows
             if getattr(r.rule, "spread_by", "") == TAKING and r.rule.spread_decides(r)]
    assert taken and all(i >= 3 for i, _ in taken), report.table()
    assert all("taking Paddle's side of 0" in r.key_figures() for _, r in taken)
    assert not any(k.startswith(TAKEN_KEY) for k in seen["t"])  # judged keeps the record as torch's run made it


def test_a_momentum_plant_beside_the_kink_stays_red_in_isolated_steps(monkeypatch):
    report, _ = run(monkeypatch, 0.8)
    assert report.crossed and report.taken and not report.passed, report.table()
    assert report.first_diverging == "0.weight after step 2", report.first_diverging
