"""Each optimizer of a `portcheck run` side replayed in float64 on the run's own gradients (the torch and Paddle
sides' recorders): what its own float32 arithmetic moves each weight by, measured as torch's own error is, a float32
run against a float64 one of the same computation (gradients/optimizers.REPLAYED). Paddle's Adam and AdamW compute
their bias corrections from float32 powers of beta (1 - 0.999 in float32 is 1.3e-5 off), torch's in float64: over a
few steps at lr 0.03 Paddle's weights drift 1e-7 from float64 where torch's stay within 5e-9, a difference no port
can close, which judge_backward allows beside torch's own error (calibrated.with_optimizers) and run says.

The twin is built as the optimizer first steps: the same class and settings over float64 copies of the weights it
holds. Each step it takes the gradients the optimizer steps on (after the script's clipping), widened, with the lr and
settings the optimizer has then (a schedule's lr). Where no twin can be built or stepped (an optimizer of the
script's own taking other arguments) none is recorded, and the steps are judged without it.
"""
import numpy as np


def stepped(run, optimizer):
    """The optimizer's twin (built at its first step) stepped on this step's gradients; run.replays: {id(optimizer):
    its twin, or None}. The twin's own step is no step of the script's (run.replaying: the recorder's hooks skip it)."""
    key = id(optimizer)
    build, step = (_torch, _torch_step) if run.fw.framework == "torch" else (_paddle, _paddle_step)
    if key not in run.replays:
        run.replaying = True
        try:
            run.replays[key] = build(run.fw, optimizer) if run.step == 0 else None
        except Exception:  # noqa: BLE001 - a twin that cannot be built measures nothing, as none
            run.replays[key] = None
        finally:
            run.replaying = False
    if run.replays[key] is None:
        return
    run.replaying = True
    try:
        step(run.fw, run.replays[key], optimizer)
    except Exception:  # noqa: BLE001 - nor one that cannot step
        run.replays[key] = None
    finally:
        run.replaying = False


def recorded(run):
    """As a step closes: REPLAYED<i>/<key>, each weight of the model minus its twin's, in the record's layout."""
    from portcheck.gradients.optimizers import REPLAYED
    weights = _torch_weights if run.fw.framework == "torch" else _paddle_weights
    said = REPLAYED.format(run.step)
    for twin in (r for r in run.replays.values() if r is not None):
        run.record.update({f"{said}{k}": np.asarray(run.record[f"state{run.step}/{k}"] - v, np.float32)
                           for k, v in weights(run.fw, twin, run.root).items() if f"state{run.step}/{k}" in run.record})


def _torch(fw, optimizer):
    """torch's twin: the optimizer's class over its groups, each parameter a float64 copy ({id(parameter): copy},
    the twin)."""
    torch, copies = fw.torch, {}
    groups = [{**g, "params": [copies.setdefault(id(p), torch.nn.Parameter(p.detach().double().clone(),
                                                                           requires_grad=p.requires_grad))
                               for p in g["params"]]} for g in optimizer.param_groups]
    return copies, type(optimizer)(groups)


def _torch_step(fw, replay, optimizer):
    """Each group's settings as they are now (the lr its schedule set), the gradients widened."""
    copies, twin = replay
    for mine, theirs in zip(twin.param_groups, optimizer.param_groups):
        mine.update({k: v for k, v in theirs.items() if k != "params"})
        for p in theirs["params"]:
            copies[id(p)].grad = None if p.grad is None else p.grad.detach().double()
    twin.step()


def _torch_weights(fw, replay, module) -> dict:
    """{torch key: the twin's weight in the record's layout (hooks_torch's layouts)} of the parameters it holds."""
    copies, _ = replay
    params = dict(module.named_parameters(remove_duplicate=False))
    held = lambda t, k: (t.source or k) in params and id(params[t.source or k]) in copies  # noqa: E731
    return {k: np.array(t.to_paddle(copies[id(params[t.source or k])].detach().numpy()))
            for k, t in fw.layouts.items() if held(t, k)}


def _parameters(optimizer) -> list:
    return [p for item in optimizer._parameter_list or () for p in (item["params"] if isinstance(item, dict)
                                                                     else [item])]


def _paddle(fw, optimizer):
    """Paddle's twin: a copy of the optimizer over float64 copies of its parameters, each of its name (which
    apply_decay_param_fun reads), lr multiple, regularizer and need_clip; its lr a number stepped() sets (a schedule
    copied would not be stepped), its dtype float64 (the lr variable it makes)."""
    import copy
    from paddle.base.framework import EagerParamBase
    paddle, copies = fw.paddle, {}
    for p in _parameters(optimizer):
        c = EagerParamBase(shape=list(p.shape), dtype="float64", name=p.name, trainable=not p.stop_gradient)
        c.set_value(p.numpy().astype(np.float64))
        c.optimize_attr, c.regularizer = dict(p.optimize_attr), p.regularizer
        c.need_clip = getattr(p, "need_clip", True)
        copies[id(p)] = c
    twin = copy.deepcopy(optimizer, dict(copies))
    twin._learning_rate, twin._learning_rate_map, twin._dtype = float(optimizer.get_lr()), {}, paddle.float64
    return copies, twin


def _paddle_step(fw, replay, optimizer):
    """The gradients widened, the lr the optimizer steps with; float64 the default while it steps (the lr's)."""
    paddle = fw.paddle
    copies, twin = replay
    for p in _parameters(optimizer):
        copies[id(p)].grad = None if p.grad is None else paddle.to_tensor(p.grad.numpy().astype(np.float64))
    before = paddle.get_default_dtype()
    paddle.set_default_dtype("float64")
    try:
        twin.set_lr(float(optimizer.get_lr()))
        twin.step()
        twin.clear_grad()
    finally:
        paddle.set_default_dtype(before)


def _paddle_weights(fw, replay, module) -> dict:
    """{Paddle key: the twin's weight in the record's layout (a weight held transposed from it, fw.flipped, back)}."""
    copies, _ = replay
    return {k: (lambda v: v.T if k in fw.flipped else v)(copies[id(p)].numpy())
            for k, p in module.state_dict().items() if id(p) in copies}
