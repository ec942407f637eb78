"""The weight-statistics flag on real figures: the committed reference run (MiniLM, one SST-2
epoch) must come out clean, and a weight-decay group wrong on one side must not."""
import numpy as np
import pytest

from bert_sst2 import hparams, paths
from portcheck.gradients import weight_stats
from portcheck.core.fileio import load_npy

REF = paths.ROOT / "log_reprod" / "diagnostics"  # the committed reference run's statistics


@pytest.fixture(scope="module")
def reference():
    stats = {fw: load_npy(REF / f"weight_stats_{fw}.npy") for fw in ("torch", "paddle")}
    shrink = weight_stats.decay_shrink(load_npy(REF / "train_curves_torch.npy")["lr"], hparams.WEIGHT_DECAY)
    return stats, shrink


def test_reference_run_flags_nothing(reference):
    stats, shrink = reference
    assert 5e-4 < shrink < 6e-4  # lr 5e-5, warmup 10%, 2105 steps, weight decay 0.01
    _, flagged, missing, _ = weight_stats.compare(stats["torch"], stats["paddle"], shrink)
    assert not flagged and not missing
    # the floor is what keeps it clean: every decayed matrix sits at ratio 1.00001 (fp32 rounding of the decay)
    _, flagged, _, _ = weight_stats.compare(stats["torch"], stats["paddle"])
    assert "bert.encoder.layer.0.intermediate.dense.weight" in flagged


def test_layernorm_decayed_on_one_side_is_flagged(reference):
    stats, shrink = reference
    # Paddle's AdamW without apply_decay_param_fun: LayerNorm and biases shrink by the run's decay too
    planted = {n: v * (1 - shrink) if not hparams.decays(n) else v for n, v in stats["paddle"].items()}
    _, flagged, _, _ = weight_stats.compare(stats["torch"], planted, shrink)
    layernorm = [n for n in stats["torch"] if n.endswith("LayerNorm.weight")]
    assert len(layernorm) == 13 and set(layernorm) <= set(flagged)
    assert all(not hparams.decays(n) for n in flagged)


def test_decay_rounding_stays_under_the_floor():
    """Both frameworks' own AdamW on a weight with zero gradient, over the reference schedule: the
    only change is weight decay, and the two round it differently by a few percent of the shrink."""
    import paddle
    import torch

    from bert_sst2.twins import pd_optim, pt_optim
    total, warmup, lr = 2105, 210, 5e-5
    w0 = np.random.RandomState(0).randn(64, 64).astype("float32") * 0.05

    class TorchWeight(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.tensor(w0))

    class PaddleWeight(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.weight = self.create_parameter(list(w0.shape))
            self.weight.set_value(w0)

    tm, pm = TorchWeight(), PaddleWeight()
    t_opt, t_sched = pt_optim.build(tm, lr, "linear", warmup, total)
    p_opt, p_sched = pd_optim.build(pm, lr, "linear", warmup, total)
    lrs = []
    for _ in range(total):
        lrs.append(pt_optim.current_lr(t_opt))
        tm.weight.grad = torch.zeros_like(tm.weight)
        t_opt.step()
        t_sched.step()
        (pm.weight * 0).sum().backward()
        p_opt.step()
        p_opt.clear_grad()
        p_sched.step()
    shrink = weight_stats.decay_shrink(lrs, hparams.WEIGHT_DECAY)
    norms = {fw: np.linalg.norm(w.astype("float64")) for fw, w in
             (("torch", tm.weight.detach().numpy()), ("paddle", pm.weight.numpy()))}
    for fw, norm in norms.items():  # each side decays by about the exact amount...
        assert abs((1 - norm / np.linalg.norm(w0.astype("float64"))) / shrink - 1) < 0.05, fw
    departure = abs(norms["paddle"] / norms["torch"] - 1)
    assert 1e-6 < departure < weight_stats.DECAY_SHARE * shrink  # ...not exactly, yet well under the floor
