"""The small conv/BatchNorm nets of `python tools/bench_k_backward.py --kinks`, where Paddle may cross a ReLU kink
in a later step: torch's net and its Paddle port (conv_bn_nets, kink_net), their optimizers and plants (KINK_PLANTS),
both sides' records of a training (kink_records) and compare_backward on one (kink_compared); the sweep over seeds,
widths and batches (kinks) and the candidate yardsticks of what torch does to itself (yardsticks), each measured as
the library judges. The tests of a kink crossed in a later step train these nets too. A module, not a command.
"""
import copy
import json
import math

import numpy as np

from portcheck.core import calibrated

# Small conv/BatchNorm nets in train mode (--kinks): 32 x 32 noise, momentum SGD, KINK_STEPS steps. In two of them
# Paddle crosses a ReLU kink at step 5 that torch moved one ulp does not: {what crosses it in torch: (seed, batch)}
KINK_NETS = {"other threads": (3, 16), "oneDNN off": (7, 8)}
KINK_WIDTHS, KINK_STEPS, KINK_LR = (8, 16, 32, 32), 6, 0.05


def conv_bn_nets(widths=KINK_WIDTHS, seed=0):
    """(torch, Paddle) ResNet-like stems in small: conv (no bias), BatchNorm, ReLU per width, then pooled logits;
    Paddle's weights are its own until converted."""
    import paddle
    import torch
    torch.manual_seed(seed)
    t, p, c = [], [], 3
    for i, o in enumerate(widths):
        t += [torch.nn.Conv2d(c, o, 3, stride=1 if i == 0 else 2, padding=1, bias=False), torch.nn.BatchNorm2d(o),
              torch.nn.ReLU()]
        p += [paddle.nn.Conv2D(c, o, 3, stride=1 if i == 0 else 2, padding=1, bias_attr=False),
              paddle.nn.BatchNorm2D(o), paddle.nn.ReLU()]
        c = o
    pt = torch.nn.Sequential(*t, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(c, 10))
    pd = paddle.nn.Sequential(*p, paddle.nn.AdaptiveAvgPool2D(1), paddle.nn.Flatten(), paddle.nn.Linear(c, 10))
    return pt, pd


def sgd(side, momentum=0.9, decay=0.0):
    """An optimizer factory of one side: SGD with momentum at KINK_LR, L2 weight decay."""
    if side == "torch":
        import torch
        return lambda params: torch.optim.SGD(params, lr=KINK_LR, momentum=momentum, weight_decay=decay)
    import paddle
    return lambda params: paddle.optimizer.Momentum(KINK_LR, momentum=momentum, parameters=params, weight_decay=(
        paddle.regularizer.L2Decay(decay) if decay else None))


def adam(side, eps=1e-8):
    if side == "torch":
        import torch
        return lambda params: torch.optim.Adam(params, lr=1e-3, eps=eps)
    import paddle
    return lambda params: paddle.optimizer.Adam(1e-3, epsilon=eps, parameters=params)


def kink_net(seed, batch, width=8):
    """(torch's net of conv_bn_nets (widths width x 1, 2, 4, 4), its Paddle port converted, a batch of 32 x 32 noise,
    its targets)."""
    from portcheck import convert
    rng = np.random.RandomState(seed)
    x, y = rng.randn(batch, 3, 32, 32).astype("float32"), rng.randint(0, 10, batch)
    pt, pd = conv_bn_nets(tuple(width * w // KINK_WIDTHS[0] for w in KINK_WIDTHS), seed)
    pd.set_state_dict(convert(pt, pd, inputs=x))
    return pt, pd, x, y


def kink_compared(seed, batch, optimizer, **kwargs):
    """compare_backward (one process, in train mode, KINK_STEPS steps) on kink_net(seed, batch); optimizer: (torch's
    factory, Paddle's)."""
    import paddle
    import torch
    from portcheck import compare_backward
    pt, pd, x, y = kink_net(seed, batch)
    return compare_backward(pt.train(), pd.train(), x, y, (torch.nn.functional.cross_entropy,
                                                          paddle.nn.functional.cross_entropy), optimizer,
                            steps=KINK_STEPS, **kwargs)


def kink_records(seed, batch, torch_optimizer, paddle_runs, width=8, steps=KINK_STEPS):
    """torch's record_backward and Paddle's, one per (optimizer, change to the Paddle model or None), of
    kink_net(seed, batch, width), in train mode; and the last item: torch's run again taking Paddle's side of a kink
    crossed (backward.judged's again)."""
    import paddle
    import torch
    from portcheck import record_backward
    pt, pd, x, y = kink_net(seed, batch, width)
    widths = tuple(width * w // KINK_WIDTHS[0] for w in KINK_WIDTHS)
    converted = copy.deepcopy(pd.state_dict())  # convert's State reads torch's weights, which the steps change
    start = copy.deepcopy(pt.state_dict())
    train = lambda crossed=None: record_backward(pt.train(), x, y, torch.nn.functional.cross_entropy,  # noqa: E731
                                                 torch_optimizer, steps=steps, crossed=crossed)
    out = [train()]
    for make, change in paddle_runs:
        pd = conv_bn_nets(widths, seed)[1]
        pd.set_state_dict(converted)
        if change:
            change(pd)
        out.append(record_backward(pd.train(), x, y, paddle.nn.functional.cross_entropy, make, steps=steps))
    return out + [lambda crossed: (pt.load_state_dict(start), train(crossed))[1]]


def _bn_momentum(pd):
    pd[4]._momentum = 0.8  # torch's momentum 0.1 is Paddle's 0.9


def _bn_epsilon(pd):
    pd[4]._epsilon = 1e-3


# {plant: (torch's optimizer, Paddle's clean one, Paddle's planted one, the change to the Paddle model)}
KINK_PLANTS = {"momentum 0.8 (torch's 0.9)": (lambda s: sgd(s), lambda s: sgd(s, 0.8), None),
               "weight decay 3e-4 (torch's 1e-4)": (lambda s: sgd(s, decay=1e-4), lambda s: sgd(s, decay=3e-4), None),
               "Adam epsilon 1e-6 (torch's 1e-8)": (adam, lambda s: adam(s, 1e-6), None),
               "one BatchNorm momentum 0.2 (torch's 0.1)": (lambda s: sgd(s), lambda s: sgd(s), _bn_momentum),
               "one BatchNorm epsilon 1e-3 (torch's 1e-5)": (lambda s: sgd(s), lambda s: sgd(s), _bn_epsilon)}


def kinks(seeds, widths=(4, 8, 16), batches=(8, 16)) -> dict:
    """Every net of the sweep (seed x width x batch) clean, with momentum SGD; then each red one, each KINK_NETS
    one and the first of the sweep, clean and with every plant of KINK_PLANTS: the share of its allowance the
    worst row after the steps uses (over 1: red), judged as compare_backward judges (backward.judged: where red and
    Paddle crossed a kink in a later step, torch's run taking Paddle's side of it)."""
    from portcheck.gradients.backward import judged
    worst = lambda report: max((r.used, f"{r.name} after step {i + 1}") for i, rows in enumerate(report.steps)  # noqa: E731
                               for r in rows if r.name != "lr")
    sweep = []
    for seed in seeds:
        for width in widths:
            for batch in batches:
                t, p, again = kink_records(seed, batch, sgd("torch"), [(sgd("paddle"), None)], width)
                report = judged(t, p, again=again)
                # rows K_BACKWARD x torch's own error alone would have failed: a jump torch's spread allows
                jumps = [r.used for rows in report.steps for r in rows if r.name != "lr" and r.rule.spread_decides(r)
                         and r.max > calibrated.K_BACKWARD * r.err32 + calibrated.Measured.floor(r)]
                sweep.append({"seed": seed, "width": width, "batch": batch, "passed": report.passed,
                              "used": worst(report)[0], "at": worst(report)[1], "jumps": len(jumps),
                              "jump_used": max(jumps, default=0.0), "taken": report.taken,
                              "crossed": [[c.step + 1, c.module, len(c.index)] for c in report.crossed]})
                print(json.dumps(sweep[-1]), flush=True)
    chosen = {(s, 8, b) for s, b in KINK_NETS.values()} | {(r["seed"], r["width"], r["batch"]) for r in sweep
                                                           if not r["passed"]} | {(seeds[0], 8, 8)}
    plants = []
    for seed, width, batch in sorted(chosen):
        for plant, (base, planted, change) in KINK_PLANTS.items():
            t, clean, bad, again = kink_records(seed, batch, base("torch"),
                                                [(base("paddle"), None), (planted("paddle"), change)], width)
            clean, bad = judged(t, clean, again=again), judged(t, bad, again=again)
            plants.append({"seed": seed, "width": width, "batch": batch, "plant": plant, "clean": worst(clean)[0],
                           "clean_at": worst(clean)[1], "planted": worst(bad)[0], "planted_at": worst(bad)[1],
                           "passed": bad.passed, "first_diverging": bad.first_diverging, "clean_taken": clean.taken,
                           "planted_taken": bad.taken})
            print(json.dumps(plants[-1]), flush=True)
    return {"sweep": sweep, "plants": plants, "yardsticks": yardsticks()}


# Candidate yardsticks of what torch does to itself, each one or two runs of torch: per run, the sign seed of its
# one-ulp move (None: not moved) and its kernels; TAKING: the library's (backward.judged)
SAME, THREADS, NO_ONEDNN = "the same kernels", "other threads", "oneDNN off"
TAKING = ("moved one ulp with other threads, and where red, taking Paddle's side of a kink crossed in a later step "
          "(the library's: one run, one more where red)")
YARDSTICKS = {"moved one ulp (one run: the rule before)": ((0, SAME),),
              "moved one ulp, two sign seeds (two runs)": ((0, SAME), (1, SAME)),
              "other threads (one run)": ((None, THREADS),),
              "oneDNN off (one run)": ((None, NO_ONEDNN),),
              "moved one ulp with other threads (one run: the library's)": ((0, THREADS),),
              "moved one ulp with oneDNN off (one run)": ((0, NO_ONEDNN),),
              "moved one ulp, with other threads and with oneDNN off (two runs)": ((0, THREADS), (0, NO_ONEDNN)),
              TAKING: ((0, THREADS),)}


def yardstick(runs):
    """A context in which record_backward's runs of torch against itself (recording.AGAINST_ITSELF) are `runs`
    (YARDSTICKS' value)."""
    import contextlib
    import torch
    from portcheck.gradients import against_itself, recording
    kernels = {SAME: contextlib.nullcontext, THREADS: against_itself.other_threads,
               NO_ONEDNN: lambda: torch.backends.mkldnn.flags(enabled=False)}
    move, seed = recording.moved_one_ulp, []

    def run(spec):
        @contextlib.contextmanager
        def kernel():
            seed[:] = [spec[0]]
            with kernels[spec[1]]():
                yield
        return kernel

    def moved(model):
        if seed[0] is not None:
            move(model, seed[0])

    @contextlib.contextmanager
    def patched():
        saved = recording.AGAINST_ITSELF, recording.moved_one_ulp
        recording.AGAINST_ITSELF, recording.moved_one_ulp = tuple(run(spec) for spec in runs), moved
        try:
            yield
        finally:
            recording.AGAINST_ITSELF, recording.moved_one_ulp = saved
    return patched()


def yardsticks() -> list:
    """Each YARDSTICKS candidate on each KINK_NETS net, clean and with each plant of KINK_PLANTS: the share of its
    allowance the worst row after the steps uses."""
    from portcheck.gradients.backward import judged
    worst = lambda report: max(r.used for rows in report.steps for r in rows if r.name != "lr")  # noqa: E731
    out = []
    for name, runs in YARDSTICKS.items():
        row = {"yardstick": name, "clean": 0.0, "planted": math.inf}
        for crossed_by, (seed, batch) in KINK_NETS.items():
            for plant, (base, planted, change) in KINK_PLANTS.items():
                with yardstick(runs):
                    t, clean, bad, again = kink_records(seed, batch, base("torch"),
                                                        [(base("paddle"), None), (planted("paddle"), change)])
                    again = again if name == TAKING else None
                    clean, bad = worst(judged(t, clean, again=again)), worst(judged(t, bad, again=again))
                row["clean"] = max(row["clean"], clean)
                if bad < row["planted"]:
                    row.update(planted=bad, least=f"{plant}, the net {crossed_by} crosses")
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


if __name__ == "__main__":
    import argparse
    import sys
    argparse.ArgumentParser(description="A module, not a command: `python tools/bench_k_backward.py --kinks SEEDS` "
                            "runs its sweep, and the kink tests train its nets.").parse_args()
    print("tools/kink_nets.py is imported, not run: run python tools/bench_k_backward.py --kinks SEEDS",
          file=sys.stderr)
    sys.exit(2)
