"""torch's float64 twin of a run: the torch model in float64 (float64, one module at a time float64_as_called),
its casts down kept float64 (wide_casts), tried in turn until one runs (float64_run), and the inputs widened
(float64_inputs): the yardstick of torch's own fp32 error. May import core and mapping's trace only."""
import contextlib
import functools
import types
import weakref

import numpy as np

from portcheck.mapping.trace import Arguments, as_tensors, is_flag, is_tensor

F64 = "f64:"       # the prefix of the torch model's float64 run in a record
ATTN_MASK = 3      # scaled_dot_product_attention(query, key, value, attn_mask, ...): the mask's place, both frameworks'


@contextlib.contextmanager
def float64(model):
    """The torch model in float64 for the time of the block, its own tensors put back afterwards (a deep copy
    costs a fifth of the comparison, and a second full model at LLM size): float32 -> float64 -> float32 is
    exact, and nothing is rounded back. The library's one float64 twin; clients use it too, and
    compare_backward trains it (its gradients and integer buffers are the twin's own, see _twin_buffers)."""
    params = [(p, p.data, p.grad) for p in model.parameters()]
    buffers = [(m, dict(m._buffers)) for m in model.modules()]
    _twin_buffers(model.modules())
    for p, _, _ in params:
        p.grad = None  # the twin's gradients are its own (double() would turn these into float64 in place)
    model.double()
    try:
        yield model
    finally:
        for p, data, grad in params:
            p.grad = None  # first: a float64 gradient does not fit the float32 tensor put back
            p.data, p.grad = data, grad
        for m, saved in buffers:
            m._buffers.update(saved)


def _twin_buffers(modules):
    """Each integer buffer (BatchNorm's num_batches_tracked) replaced by a copy: double() keeps it integer, so
    it is shared with the float32 model, and the twin's own steps or train-mode calls must not count there."""
    for m in modules:
        for name, b in m._buffers.items():
            if b is not None and not b.is_floating_point():
                m._buffers[name] = b.clone()


@contextlib.contextmanager
def float64_as_called(model, free: dict = None):
    """The torch model in float64 one module at a time: a module's own floating tensors become float64 when it
    is called and go back when it returns, so the twin costs the weights of the modules running (at most an
    embedding), not a second model in float64: for a 1.1B-parameter model, 8.8 GB less than float64(model).
    The values are float64's exactly (float32 -> float64 is exact); a module that reads another's tensor
    without calling it (a head tied to the embedding's weight) meets it in float32 and raises: float64_run
    then runs the whole model in float64. free: {size: [float64 tensors]} to cast into, and that the run's
    float64 tensors go back to (the caller's, to keep them from one run to the next), else the run's own.
    Two modules are not cast whole: an nn.Embedding (a lookup: its float32 rows widened after it are float64's
    rows, bit for bit) and an nn.Linear larger than CAST_BLOCK (its weight cast a block of rows at a time,
    _linear_by_rows: the same products, summed by BLAS in another order, so a float64 rounding apart: 6.2e-15 at
    most on outputs of size ~1 for a head of the 1.1B pair's shape, eight decades below the float32 error they
    measure). At 1.1B each weight is 0.5 GB in float64, and its pages new in every comparison (docs/bench/llm.md)."""
    saved, depth, handles, free = [], {}, [], {} if free is None else free
    by_rows = set()  # the nn.Linear modules whose forward is _linear_by_rows for the block
    lookups = set()  # the nn.Embedding modules left in float32, their output widened (_lookup)

    def enter(module, *_):
        depth[module] = depth.get(module, 0) + 1
        if depth[module] == 1:  # a module entered again inside its own call is in float64 already
            lookup, blocked = module in lookups, module in by_rows
            for p in module.parameters(recurse=False):
                if p.is_floating_point() and not lookup and not (blocked and p is module.weight):
                    saved.append((module, p, p.data))
                    p.data = _widened(p.data, free)
            for name, b in module._buffers.items():
                if b is not None:  # an integer buffer gets a copy (_twin_buffers), a floating one its float64
                    saved.append((module, name, b))
                    module._buffers[name] = b.double() if b.is_floating_point() else b.clone()

    def leave(module, *_):
        depth[module] -= 1
        if depth[module] == 0:
            while saved and saved[-1][0] is module:
                _, tensor, data = entry = saved.pop()
                wide = None if isinstance(tensor, str) else tensor.data
                _put_back(*entry)
                # a float64 weight's double() is the weight itself: never one to cast into
                if wide is not None and wide.dtype != data.dtype and _unshared(wide):
                    free.setdefault(wide.numel(), []).append(wide)

    for module in model.modules():
        if any(True for _ in module.parameters(recurse=False)) or any(b is not None for b in module._buffers.values()):
            handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave, always_call=True)]
        if _lookup(module):
            handles.append(module.register_forward_hook(_widened_output))
            lookups.add(module)
        rows = _row_block(module)
        if rows:  # for the whole block: a pre-hook is too late, torch reads module.forward before it runs them
            module.forward = functools.partial(_linear_by_rows, module, rows, free)
            by_rows.add(module)
    try:
        yield model
    finally:
        for h in handles:
            h.remove()
        for module in by_rows:
            del module.forward  # the class's own again
        while saved:
            _put_back(*saved.pop())


CAST_BLOCK = 8 << 20  # float64 values cast at a time for a larger nn.Linear's weight (64 MB)


def _lookup(module) -> bool:
    """An nn.Embedding itself (no subclass's own forward) without max_norm (which rescales rows in place): its
    output is float32 rows of its weight, exactly float64's rows once widened."""
    import torch
    return type(module) is torch.nn.Embedding and module.max_norm is None


def _widened_output(module, args, output):
    return output.double() if is_tensor(output) and output.is_floating_point() else None


def _row_block(module) -> int:
    """Rows of the weight cast at a time by _linear_by_rows, for an nn.Linear itself whose weight holds more than
    CAST_BLOCK values; else 0 (cast whole)."""
    import torch
    if type(module) is not torch.nn.Linear or "forward" in vars(module) or not module.weight.is_floating_point():
        return 0
    rows, width = module.weight.shape
    return max(1, CAST_BLOCK // width) if rows * width > CAST_BLOCK else 0


def _linear_by_rows(module, rows: int, free: dict, x):
    """nn.Linear's forward in float64, its float32 weight cast `rows` rows at a time into one float64 block taken
    from `free` and given back: F.linear's values on the whole float64 weight, a float64 rounding apart
    (tests/test_size.py)."""
    import torch
    weight, bias = module.weight, module.bias
    size = rows * weight.shape[1]
    block = _spare(free, size)
    block = torch.empty(size, dtype=torch.float64) if block is None else block
    try:
        out = None
        for start in range(0, weight.shape[0], rows):
            part = weight[start:start + rows]
            y = torch.nn.functional.linear(x, block[:part.numel()].view(part.shape).copy_(part),
                                           None if bias is None else bias[start:start + rows])
            if out is None:
                out = y.new_empty((*y.shape[:-1], weight.shape[0]))
            out[..., start:start + rows] = y
    finally:
        free.setdefault(size, []).append(block)
    return out


def _widened(t, free: dict):
    """t in float64, in a float64 tensor of its size that an earlier call gave back (free: {size: [tensors]}) when
    there is one: at LLM size a fresh block per call pays its pages again (the 1.1B pair's float64 run spent 2.4 s
    in casts inside a comparison, 0.6 s alone, docs/bench/llm.md)."""
    spare = _spare(free, t.numel()) if t.is_contiguous() else None
    return t.double() if spare is None else spare.view(t.shape).copy_(t)


def _spare(free: dict, size: int):
    """A float64 tensor of `size` values an earlier call gave back to `free` (taken out of it), or None."""
    spare = free.get(size)
    return spare.pop() if spare else None


def _unshared(t) -> bool:
    """Nothing but `t` holds its memory (no view of a weight returned by the module, as `cls_token.expand(...)`):
    only then may a later cast overwrite it. False where torch cannot tell (a private call, absent from some
    version)."""
    import torch
    count = getattr(torch._C, "_storage_Use_Count", None)
    return count is not None and t.is_contiguous() and count(t.untyped_storage()._cdata) == 2  # t's + the call's


def _put_back(module, tensor, data):
    if isinstance(tensor, str):
        module._buffers[tensor] = data
    else:
        tensor.data = data


def float64_run(model, run, failed=lambda result: False, free: dict = None, whole_first: bool = False):
    """run() with the torch model in float64, module by module as it is called (float64_as_called, casting into
    `free`'s tensors); if that raises or its result is failed(result), once more with the whole model in float64
    (float64): a model reading one module's tensor in another, which only the whole model's float64 serves; if
    that fails too, once more with each of WIDER in turn: torch's default dtype float64 (a tensor the model makes
    in the default dtype, filled with its input's torch.finfo(dtype).min, which float32 cannot hold), then
    float64's finfo bounds float32's (a float32 mask scaled by finfo(float64).min: -inf, and NaN where 0 x -inf).
    Each run under wide_casts, the last once more without (cast_wide). The last one's error, if any, is raised; its
    result returned, failed or not. whole_first: the whole model in float64 tried first, module by module after
    the rest: a run calling each module many times (decoding, a step per token) casts its weights once, not at
    every call, for the float64 copy of the model float64(model) holds meanwhile."""
    as_called = lambda: float64_as_called(model, free)
    wholes = [lambda: float64(model), *(functools.partial(_whole, model, wider) for wider in WIDER)]
    tried = cast_wide([*wholes, as_called] if whole_first else [as_called, *wholes])
    if grouped_experts(model):  # transformers 5's grouped experts refuse float64: their eager loop is the same model
        tried = tried[:-1] + [functools.partial(_casting, functools.partial(_eager, model, a))
                              for a in (as_called, wholes[0])] + tried[-1:]
    return in_turn(tried, run, failed)


def experts_eager(model):
    """A context running a torch model's grouped experts by their eager loop for its float64 twin (said in EAGER), or
    nothing where it has none: compare_backward's twin, which casts the whole model."""
    return _eager(model, contextlib.nullcontext) if grouped_experts(model) else contextlib.nullcontext()


EAGER = weakref.WeakKeyDictionary()  # {torch model: the line saying its float64 run ran its experts eagerly}


def grouped_experts(model) -> list:
    """The configs of a torch model's modules whose experts run by another implementation than their eager loop
    (transformers 5's config._experts_implementation: "grouped_mm" and the like, which refuse float64)."""
    seen = {}
    for module in model.modules():
        config = getattr(module, "config", None)
        if getattr(config, "_experts_implementation", None) not in (None, "eager"):
            seen[id(config)] = config
    return list(seen.values())


@contextlib.contextmanager
def _eager(model, attempt):
    """attempt() with every config grouped_experts() finds set to run its experts eagerly, put back afterwards; said
    in EAGER when the run it serves ends."""
    configs = grouped_experts(model)
    before = [c._experts_implementation for c in configs]
    for c in configs:
        c._experts_implementation = "eager"
    try:
        with attempt():
            yield
        EAGER[model] = (f"torch's float64 run (the yardstick of its own float32 error) ran its experts by their eager "
                        f"loop (experts_implementation='eager'): its {before[0]!r} experts refuse float64; its float32 "
                        "run is as the model runs")
    finally:
        for c, b in zip(configs, before):
            c._experts_implementation = b


def cast_wide(attempts: list) -> list:
    """attempts (the contexts in_turn tries a float64 twin in), each under wide_casts, then the last once more
    without: a twin that meets a float32 tensor the caller made (a loss's class weights, its targets) beside a value
    the model cast to float32 raises under wide_casts, and runs as it did before them."""
    return [*(functools.partial(_casting, attempt) for attempt in attempts), attempts[-1]]


@contextlib.contextmanager
def _casting(attempt):
    with attempt(), wide_casts():
        yield


def in_turn(attempts, run, failed=lambda result: False, catch=Exception):
    """run() under each context of `attempts` in turn, until one neither raises `catch` nor gives a result
    failed(result) calls failed: the last one's error is raised, its result returned, failed or not."""
    for i, attempt in enumerate(attempts):
        last = i == len(attempts) - 1
        try:
            with attempt():
                result = run()
        except catch:  # noqa: BLE001 - the next try follows; the last one's own error is raised
            if last:
                raise
            continue
        if last or not failed(result):
            return result


@contextlib.contextmanager
def _whole(model, wider):
    with float64(model), wider():
        yield model


@contextlib.contextmanager
def wide_defaults():
    """torch's default floating dtype float64 for the block (a tensor the model makes with torch.zeros or
    torch.tensor(1.5) is then float64, as its float64 run needs), the caller's put back afterwards."""
    import torch
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@contextlib.contextmanager
def float32_bounds():
    """wide_defaults, and torch.finfo(torch.float64)'s min and max float32's for the block (its eps, tiny and
    resolution float64's own), torch.finfo put back afterwards. A model scaling a mask it makes in float32 by its
    dtype's bound, (1 - mask) * torch.finfo(self.dtype).min (mask.float() stays float64 there: wide_casts), gets
    -inf, and NaN where 0 x -inf, in its float64 twin, where its float32 run is finite: with float32's bounds the
    twin computes the float32 run's own mask (a value below any score, 0 after softmax) in float64, the yardstick of
    what the float32 run computes. Tried only when the twin failed without it (float64_run,
    backward.record_backward)."""
    import torch
    real, bounds = torch.finfo, torch.finfo(torch.float32)

    def finfo(type=None):
        info = real() if type is None else real(type)
        if info.dtype != "float64":
            return info
        said = {k: getattr(info, k) for k in ("bits", "dtype", "eps", "resolution", "smallest_normal", "tiny")}
        return types.SimpleNamespace(**said, min=bounds.min, max=bounds.max)
    with wide_defaults():
        torch.finfo = finfo
        try:
            yield
        finally:
            torch.finfo = real


WIDER = (wide_defaults, float32_bounds)  # how a failed float64 twin is run again, in turn


@contextlib.contextmanager
def wide_casts():
    """Every cast down to float32, float16 or bfloat16 of a float64 tensor, or of an integer or boolean one,
    float64 for the block (a torch function mode, left as the block ends): the model's own casts keep its twin in
    float64. transformers' LlamaRMSNorm computes in hidden_states.to(torch.float32), its rotary embedding in
    .float(), its attention's softmax with dtype=torch.float32: in the twin those would be float32 roundings, and
    torch's own error there (the yardstick of the Paddle port's) measured near 0. The casts: .to(dtype),
    .to(tensor), .to(device, dtype), .float(), .half(), .bfloat16(), .type(dtype), .type_as(tensor), and any dtype=
    of a function on such a tensor (softmax, log_softmax, mean, sum, ...). A float32 tensor the twin made in the
    default dtype is cast as asked, and .view(dtype) reinterprets bits, so is left alone. Entered only around
    the twin's own run (cast_wide: float64_run, backward.record_backward's twin), never the float32 one."""
    with _WideCasts()():
        yield


@functools.lru_cache(maxsize=None)
def _WideCasts():
    """wide_casts' mode class, made at first use (the library imports torch only when it is used)."""
    import torch
    from torch.overrides import TorchFunctionMode
    lower = {torch.float32, torch.float16, torch.bfloat16}
    named = {f"torch.{n}Tensor" for n in ("Float", "Half", "BFloat16")}  # .type("torch.FloatTensor")
    down = {torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16}
    casts = {torch.Tensor.to, torch.Tensor.type}
    attention = torch.nn.functional.scaled_dot_product_attention

    def wide(x):
        if isinstance(x, torch.dtype):
            return torch.float64 if x in lower else x
        return "torch.DoubleTensor" if isinstance(x, str) and x in named else x

    class WideCasts(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is attention:
                args, kwargs = mask_widened(args, kwargs)
            this = args[0] if args else None
            held = isinstance(this, torch.Tensor) and (this.dtype == torch.float64 or not (
                this.is_floating_point() or this.is_complex()))  # float64, or integer / boolean
            if held and func is not torch.Tensor.view:
                if func in down:
                    func = torch.Tensor.double
                elif func is torch.Tensor.type_as and args[1].dtype in lower:
                    func, args = torch.Tensor.to, (this, torch.float64)
                elif func in casts:
                    rest = list(args[1:])
                    if rest and isinstance(rest[0], torch.Tensor):  # .to(other): its device, its dtype widened
                        rest[:1] = [rest[0].device, wide(rest[0].dtype)]
                    args = (this, *map(wide, rest))
                elif any(isinstance(a, torch.dtype) for a in args[1:]):
                    args = (this, *map(wide, args[1:]))  # torch.softmax(x, dim, torch.float32)
                if "dtype" in kwargs:
                    kwargs["dtype"] = wide(kwargs["dtype"])
            return func(*args, **kwargs)
    return WideCasts


def mask_widened(args, kwargs):
    """scaled_dot_product_attention's arguments, a floating attn_mask narrower than the queries widened to their
    dtype, exactly: torch 2.13's CPU kernel misreads a float32 mask beside float64 queries (a causal mask the model
    makes in float32, torch.full(..., -inf), in its float64 twin: 3.4 off at 63 of 64 positions, right at 5), which
    made torch's own error, the yardstick, that large. wide_casts' and run's float64 run (wrapping) alike."""
    query = args[0] if args else kwargs.get("query")
    at = len(args) > ATTN_MASK
    mask = args[ATTN_MASK] if at else kwargs.get("attn_mask")
    if mask is None or query is None or not mask.is_floating_point() or mask.dtype.itemsize >= query.dtype.itemsize:
        return args, kwargs
    wide = mask.to(query.dtype)
    return ((*args[:ATTN_MASK], wide, *args[ATTN_MASK + 1:]), kwargs) if at else (args, {**kwargs, "attn_mask": wide})


def float64_inputs(inputs):
    cast = lambda v: np.asarray(v).astype(np.float64) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
    if isinstance(inputs, Arguments):  # its arrays widened, wherever they are (as_tensors)
        return Arguments(as_tensors(inputs.args, cast), as_tensors(inputs.kwargs, cast))
    if isinstance(inputs, dict):
        return {k: v if is_flag(v) else cast(v) for k, v in inputs.items()}
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(cast(v) for v in inputs)
    return cast(inputs)
