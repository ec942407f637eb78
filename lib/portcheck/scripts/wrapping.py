"""What both frameworks' hooks (hooks_torch.TorchSide, hooks_paddle.PaddleSide) wrap alike, framework-free: the
losses table and each loss call's settings in torch's conventions, the module call, Tensor.backward, dropout, the
seeds, the samplers and the optimizers' registration, each reporting to the side's Run (recorder.Run, handed in as
`run`); the tied keys of a torch record. Imports numpy and the standard library only: the hooks and the recorder
import it, never the other way.
"""
import functools
import inspect

import numpy as np

TIED = "tied/"  # a torch record's key: tied/<torch key>/<the first key of its tensor>, an empty array


def ties(record: dict) -> dict:
    """{torch key: the first torch key of the same tensor} (a head's weight tied to the embedding's), from a torch
    record's TIED keys."""
    return dict(k[len(TIED):].rsplit("/", 1) for k in record if k.startswith(TIED))


# every loss of both frameworks, by torch's functional name: (Paddle's functional name, its settings, by torch's
# names, in torch's conventions). A Paddle setting spelled otherwise: PADDLE_SPELLING; Paddle's smooth_l1_loss is
# torch's huber_loss unless is_huber=False (loss_settings).
LOSSES = {
    "cross_entropy": ("cross_entropy", ("reduction", "weight", "ignore_index", "label_smoothing", "soft_label",
                                        "use_softmax")),
    "nll_loss": ("nll_loss", ("reduction", "weight", "ignore_index")),
    "mse_loss": ("mse_loss", ("reduction", "weight")),
    "l1_loss": ("l1_loss", ("reduction", "weight")),
    "smooth_l1_loss": ("smooth_l1_loss", ("reduction", "beta")),
    "huber_loss": (None, ("reduction", "delta", "weight")),
    "binary_cross_entropy": ("binary_cross_entropy", ("reduction", "weight")),
    "binary_cross_entropy_with_logits": ("binary_cross_entropy_with_logits", ("reduction", "weight", "pos_weight")),
    "kl_div": ("kl_div", ("reduction", "log_target")),
    "ctc_loss": ("ctc_loss", ("reduction", "blank", "zero_infinity", "norm_by_times")),
    "margin_ranking_loss": ("margin_ranking_loss", ("reduction", "margin")),
    "cosine_embedding_loss": ("cosine_embedding_loss", ("reduction", "margin")),
    "hinge_embedding_loss": ("hinge_embedding_loss", ("reduction", "margin")),
    "soft_margin_loss": ("soft_margin_loss", ("reduction",)),
    "triplet_margin_loss": ("triplet_margin_loss", ("reduction", "margin", "p", "eps", "swap")),
    "triplet_margin_with_distance_loss": ("triplet_margin_with_distance_loss", ("reduction", "margin", "swap")),
    "multilabel_soft_margin_loss": ("multi_label_soft_margin_loss", ("reduction", "weight")),
    "multilabel_margin_loss": ("multi_label_margin_loss", ("reduction",)),
    "multi_margin_loss": ("multi_margin_loss", ("reduction", "p", "margin", "weight")),
    "poisson_nll_loss": ("poisson_nll_loss", ("reduction", "log_input", "full", "eps")),
    "gaussian_nll_loss": ("gaussian_nll_loss", ("reduction", "full", "eps")),
}
# Paddle's losses that are one of torch's with some settings fixed
PADDLE_ONLY = {"softmax_with_cross_entropy": ("cross_entropy", {"reduction": "none"}),
               "square_error_cost": ("mse_loss", {"reduction": "none"})}
PADDLE_SPELLING = {"eps": "epsilon"}
# a setting one framework does not have, as the other's default
DEFAULTS = {"weight": None, "pos_weight": None, "label_smoothing": 0.0, "soft_label": False, "use_softmax": True,
            "zero_infinity": False, "norm_by_times": False, "log_target": False}
TARGETS = ("target", "targets", "label", "labels")  # the argument a loss's target is
# the loss classes, by the name both frameworks give them: their functional's torch name
LOSS_CLASSES = {"CrossEntropyLoss": "cross_entropy", "NLLLoss": "nll_loss", "MSELoss": "mse_loss",
                "L1Loss": "l1_loss", "SmoothL1Loss": "smooth_l1_loss", "HuberLoss": "huber_loss",
                "BCELoss": "binary_cross_entropy", "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
                "KLDivLoss": "kl_div", "CTCLoss": "ctc_loss", "MarginRankingLoss": "margin_ranking_loss",
                "CosineEmbeddingLoss": "cosine_embedding_loss", "HingeEmbeddingLoss": "hinge_embedding_loss",
                "SoftMarginLoss": "soft_margin_loss", "TripletMarginLoss": "triplet_margin_loss",
                "TripletMarginWithDistanceLoss": "triplet_margin_with_distance_loss",
                "MultiLabelSoftMarginLoss": "multilabel_soft_margin_loss",
                "MultiLabelMarginLoss": "multilabel_margin_loss", "MultiMarginLoss": "multi_margin_loss",
                "PoissonNLLLoss": "poisson_nll_loss", "GaussianNLLLoss": "gaussian_nll_loss"}
DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
# attention with its own dropout (transformers' and paddlenlp's attention in train mode, torch's MultiheadAttention):
# (query, key, value, attn_mask, dropout_p, ...) in both frameworks
ATTENTIONS = ("scaled_dot_product_attention",)
DROPOUT_P = 4  # dropout_p's place among their arguments


def _value(v):
    """A setting as the configuration holds it: a tensor (a class weight) as its values, rounded."""
    if hasattr(v, "numpy") and hasattr(v, "shape"):
        v = v.detach().cpu() if hasattr(v, "detach") else v
        return [round(float(w), 7) for w in np.asarray(v.numpy()).reshape(-1)]
    if isinstance(v, (bool, str)) or v is None:
        return v
    return float(v) if isinstance(v, (float, np.floating)) else int(v) if isinstance(v, (int, np.integer)) else str(v)


def loss_settings(name: str, get, paddle: bool, target=None) -> tuple:
    """(torch's name of a loss, {setting: value} in torch's conventions), or (its own name, {"known": False}) for a
    loss portcheck does not know. name: the framework's functional name; get(setting): the call's value of a setting
    by its framework's spelling (a loss class's: its attribute), DEFAULTS' where it has none; target: its target
    (a float one of cross_entropy is torch's soft label)."""
    fixed = {}
    if paddle:
        if name in PADDLE_ONLY:
            name, fixed = PADDLE_ONLY[name]
        elif name == "smooth_l1_loss" and get("is_huber") is not False:
            name, fixed = "huber_loss", {"delta": get("delta")}
        elif name == "smooth_l1_loss":
            fixed = {"beta": get("delta")}
        else:
            name = next((t for t, (p, _) in LOSSES.items() if p == name), None) or f"paddle:{name}"
    if name not in LOSSES:
        return name.removeprefix("paddle:"), {"known": False}
    spelled = PADDLE_SPELLING if paddle else {}
    read = lambda k: fixed[k] if k in fixed else get(spelled.get(k, k))
    out = {k: _value(read(k)) for k in LOSSES[name][1]}
    if not paddle:
        if get("reduce") is not None or get("size_average") is not None:  # torch's legacy spelling of reduction
            out["reduction"] = "none" if get("reduce") is False else "sum" if get("size_average") is False else "mean"
        if name == "cross_entropy":
            out["soft_label"] = bool(getattr(target, "is_floating_point", lambda: False)())
    if name in ("smooth_l1_loss", "huber_loss"):  # torch's huber_loss(delta) is delta x smooth_l1_loss(beta=delta)
        beta = out.pop("delta", None) if name == "huber_loss" else out["beta"]
        out.update(beta=beta, scale=beta if name == "huber_loss" else 1.0)
        name = "smooth_l1_loss"
    return name, out


def class_loss(module, name: str, paddle: bool, args, kwargs):
    """(torch's name, settings, the call's bound arguments, its target's argument name) of a loss class's call
    (name: its functional's, the framework's loss_class), its settings read from its attributes and the call's
    arguments (Paddle's CTCLoss takes norm_by_times in its call); None when the arguments do not fit its forward."""
    bound = _bound(inspect.signature(module.forward), args, kwargs)
    if bound is None:
        return None
    a = bound.arguments
    target = next((k for k in TARGETS if k in a), None)
    # its attribute (some of Paddle's classes keep a setting as _<name>: NLLLoss's _weight; Layer.full is a method),
    # else the call's argument (torch's PoissonNLLLoss calls its input log_input: an attribute first)
    missing = object()
    get = lambda k: next((v for v in (getattr(module, n, missing) for n in (k, "_" + k))
                          if v is not missing and not callable(v)), a.get(k, DEFAULTS.get(k)))
    return (*loss_settings(name, get, paddle, a.get(target)), bound, target)


def framework_losses(functional) -> list:
    """The loss functionals a framework has: the ones portcheck knows and any other (said as not known)."""
    return [n for n in dir(functional) if n.endswith(("_loss", "entropy", "_cost")) or n in LOSSES or n == "kl_div"]


def wrap_framework(run, module_class, tensor_class, functional, loss):
    """What a script of either framework goes through, wrapped alike: every module call, Tensor.backward, the
    functional losses (loss(run, name, fn): the framework's wrapper) and dropouts."""
    module_call = module_class.__call__

    def call(module, *args, **kwargs):
        return run.module_call(module, functools.partial(module_call, module), args, kwargs)
    module_class.__call__ = call
    backward = tensor_class.backward

    @functools.wraps(backward)
    def tensor_backward(tensor, *args, **kwargs):
        run.backward(tensor)
        out = backward(tensor, *args, **kwargs)
        run.after_backward()
        return out
    tensor_class.backward = tensor_backward
    for name in framework_losses(functional):
        if callable(getattr(functional, name)):
            setattr(functional, name, loss(run, name, getattr(functional, name)))
    for name in DROPOUTS:
        if hasattr(functional, name):
            setattr(functional, name, no_dropout(run, getattr(functional, name)))
    for name in ATTENTIONS:
        if hasattr(functional, name):
            setattr(functional, name, no_attention_dropout(run, getattr(functional, name)))


class SharedSide:
    """What hooks_torch.TorchSide and hooks_paddle.PaddleSide read alike: both frameworks' modules have state_dict()
    and named_parameters() (the modules kept beside the model: first_call.kept_modules, first_call.keep)."""
    run = None  # the Run its hooks report to, set by install.install

    def state_keys(self, module) -> list:
        return list(module.state_dict())

    def parameter_names(self, module) -> list:
        return [n for n, _ in module.named_parameters()]

    def state_tensors(self, module) -> list:
        return list(module.state_dict().values())


def registering(run, init):
    """An optimizer class's __init__ that registers the optimizer it builds (once: a subclass's calls its parent's)."""
    @functools.wraps(init)
    def optimizer_init(opt, *args, **kwargs):
        init(opt, *args, **kwargs)
        if not run.replaying and not any(o is opt for o in run.optimizers):  # a replay's twin is not the script's
            run.optimizers.append(opt)
    return optimizer_init


def _bound(signature, args, kwargs):
    """The call's arguments by name, its defaults filled; None if they do not fit (the call's own error follows)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return bound


def no_dropout(run, fn):
    """Dropout off for the N steps: the two frameworks draw different masks. Its p, at its call site in the first
    forward (run.dropout_site), is compared instead."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def dropout(input, *args, **kwargs):
        if run.sites:
            bound = _bound(signature, (input, *args), kwargs)
            if bound is not None:
                a = bound.arguments
                run.dropout_site(a.get("p", 0.0) if a.get("training", True) else 0.0, input)
        return input if run.dropout_off else fn(input, *args, **kwargs)
    return dropout


def no_attention_dropout(run, fn):
    """An attention's own dropout (dropout_p) off for the N steps, as no_dropout's, its p recorded as no_dropout's.
    In torch's float64 run, a float mask the script made in float32 is widened to the queries' dtype (twin's
    mask_widened: torch's kernel misreads it)."""
    @functools.wraps(fn)
    def attention(*args, **kwargs):
        if run.side == "torch64":
            from portcheck.forward.twin import mask_widened  # here: this module imports no other of the library
            args, kwargs = mask_widened(args, kwargs)
        if run.sites:
            run.dropout_site(args[DROPOUT_P] if len(args) > DROPOUT_P else kwargs.get("dropout_p", 0.0),
                             attention=True)
        if run.dropout_off:
            if len(args) > DROPOUT_P:
                args = (*args[:DROPOUT_P], 0.0, *args[DROPOUT_P + 1:])
            else:
                kwargs["dropout_p"] = 0.0
        return fn(*args, **kwargs)
    return attention


def clipping(run, utils, tensor_class, trainable):
    """utils.clip_grad_norm_ and utils.clip_grad_value_ (torch.nn.utils', paddle.nn.utils': PaConvert writes torch's
    call as Paddle's, which clips as torch's does), each recorded as the clipping it is (run.clip): its kind, bound and
    the root's trainable parameters it is given, one norm over them."""
    import inspect
    for name, kind in (("clip_grad_norm_", "global_norm"), ("clip_grad_value_", "value")):
        fn = getattr(utils, name, None)
        if fn is None:
            continue
        signature = inspect.signature(fn)

        def clip(*args, _fn=fn, _kind=kind, _signature=signature, **kwargs):
            bound = _bound(_signature, args, kwargs)
            if bound is None:
                return _fn(*args, **kwargs)  # the call's own error
            given = bound.arguments["parameters"]
            given = [given] if isinstance(given, tensor_class) else list(given)  # a generator is read once
            bound.arguments["parameters"] = given
            ids = {id(p) for p in given}
            names = None if run.root is None else [n for n, p in run.root.named_parameters()
                                                   if id(p) in ids and trainable(p)]
            norm = float(bound.arguments.get("norm_type", 2.0))
            said = _kind if _kind == "value" or norm == 2.0 else f"global_norm (norm {norm:g})"
            run.clip(said, bound.arguments["max_norm" if _kind != "value" else "clip_value"], names)
            return _fn(*bound.args, **bound.kwargs)
        setattr(utils, name, functools.wraps(fn)(clip))
        if hasattr(utils, "clip_grad") and hasattr(utils.clip_grad, name):
            setattr(utils.clip_grad, name, getattr(utils, name))


def seeded(run, where, name, said):
    fn = getattr(where, name)

    @functools.wraps(fn)
    def seed(*args, **kwargs):
        if args:
            run.config["seeds"][said] = repr(args[0])
        return fn(*args, **kwargs)
    setattr(where, name, seed)


def sampling(run, cls, sampler: str, size, allowed, shuffles=lambda s: True):
    """cls.__iter__ (a framework sampler's, yielding indices) drawing through run.order while shuffles(it): size(it)
    the samples it draws from, allowed(it) the indices its dataset has."""
    own = cls.__iter__

    @functools.wraps(own)
    def iterate(s):
        drawn = own(s)
        return run.order(sampler, size(s), drawn, allowed(s)) if shuffles(s) else drawn
    cls.__iter__ = iterate


def loss_wrapper(run, name, fn, paddle: bool, widen=None):
    """A functional loss whose target (torch's "target", Paddle's "label") goes through run.loss_call with its
    settings (loss_settings); widen(bound), the float64 run's, casts what meets its float64 output."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn  # a builtin without a signature: not a loss a script calls

    @functools.wraps(fn)
    def loss(*args, **kwargs):
        bound = _bound(signature, args, kwargs)
        if bound is None:
            return fn(*args, **kwargs)  # the call's own error, as the user would see it
        a = bound.arguments
        target = next((k for k in TARGETS if k in a), None)
        said, settings = loss_settings(name, lambda k: a.get(k, DEFAULTS.get(k)), paddle, a.get(target))
        given = run.loss_call(said, a.get(target), settings)
        if target is not None:
            a[target] = given
        if widen is not None:
            widen(bound)
        return fn(*bound.args, **bound.kwargs)
    return loss


def stepped_ahead(step, lr, steps: int) -> list:
    """[lr() after each of `steps` calls of step()]: a copy of a schedule stepped past the run (hooks_torch's and
    hooks_paddle's lr_ahead), fewer where it ends (OneCycleLR raises past its total_steps): compared up to there."""
    out = []
    for _ in range(steps):
        try:
            step()
        except Exception:
            break
        out.append(float(lr()))
    return out
