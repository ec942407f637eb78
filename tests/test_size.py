"""Any size (issue 34): convert sets the Paddle model one tensor at a time, the float64 twin holds one module at a
time, records can go to disk and judge as in memory, and a guide's bound below torch's own error is said so.
Each check also runs against a planted, realistic bug and must go red."""
import contextlib
import os
import tracemalloc

import numpy as np
import paddle
import pytest
import torch

import portcheck.forward.compare as compare
import portcheck.forward.twin as twin
from portcheck import compare_forward, convert, judge_forward, record_forward
from portcheck.core import calibrated, spill
from portcheck.forward.twin import F64
from portcheck.mapping.convert import plan
from portcheck.core.errors import PipelineError
from portcheck.core.spill import Spill

LLAMA = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
IDS = {"input_ids": np.random.RandomState(0).randint(1, 64, (2, 16)).astype("int64")}
HEAD = {"LlamaLMHead": "transpose"}


def llama_pair(**planted):
    from paddlenlp.transformers import LlamaConfig as PaddleConfig, LlamaForCausalLM as PaddleLlama
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    paddle.seed(0)
    pt = LlamaForCausalLM(LlamaConfig(**LLAMA, attn_implementation="eager")).eval()
    return pt, PaddleLlama(PaddleConfig(**{**LLAMA, **planted})).eval()


def old_convert(torch_model, paddle_model, layouts=None) -> dict:
    """convert as it was before issue 34: every tensor copied into one dict, then set_state_dict."""
    out = {key: np.ascontiguousarray(tensor.to_paddle(array))
           for key, tensor, array in plan(torch_model, paddle_model, layouts=layouts).values()}
    paddle_model.set_state_dict(out)
    return out


# ---------------------------------------------------------------- convert: one tensor at a time

def test_convert_sets_the_model_as_the_old_convert_did():
    """The same keys, the same arrays (dtype included) and the same Paddle weights, bit for bit; the result is
    read from the torch model on demand, and set_state_dict still takes it."""
    pt, pd_old = llama_pair()
    old = old_convert(pt, pd_old, HEAD)
    _, pd = llama_pair()
    state = convert(pt, pd, layouts=HEAD)
    assert list(state) == list(old)
    assert all(state[k].dtype == old[k].dtype and np.array_equal(state[k], old[k]) for k in old)
    assert all(np.array_equal(v.numpy(), pd_old.state_dict()[k].numpy()) for k, v in pd.state_dict().items())
    pd.set_state_dict(state)  # the older use
    assert compare_forward(pt, pd, IDS).passed


class Stack(torch.nn.Module):
    def __init__(self, n=8, width=256):
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(n)])

    def forward(self, x):
        return self.layers(x)


class PaddleStack(paddle.nn.Layer):
    def __init__(self, n=8, width=256):
        super().__init__()
        self.layers = paddle.nn.Sequential(*[paddle.nn.Linear(width, width) for _ in range(n)])

    def forward(self, x):
        return self.layers(x)


def traced_peak(fn) -> int:
    """The most numpy and Python held at once during fn (tracemalloc: numpy's arrays are traced)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("planted", [None, "a full copy of the weights, then set_state_dict"])
def test_convert_holds_one_tensor_at_a_time(planted):
    """Eight 256 x 256 Linears (2.1 MB of weights): convert's peak is about one transposed weight (262 kB), never
    the whole state; the old convert, planted back, holds every tensor at once and is red."""
    pt, pd = Stack(), PaddleStack()
    tensor, weights = 256 * 256 * 4, sum(p.numel() * 4 for p in pt.parameters())
    peak = traced_peak(lambda: old_convert(pt, pd) if planted else convert(pt, pd))
    holds_one = peak < 2 * tensor + 100_000
    assert holds_one != bool(planted), f"peak {peak} bytes; one tensor {tensor}, the weights {weights}"
    assert np.array_equal(pd.layers[3].weight.numpy(), pt.layers[3].weight.detach().numpy().T)


def test_convert_checks_every_key_before_it_sets_any():
    """A dtype that differs is one line, and the Paddle model is left as it was: no half-converted model."""
    pt, pd = Stack(2, 8), PaddleStack(2, 8)
    pt.layers[1].double()
    before = {k: v.numpy().copy() for k, v in pd.state_dict().items()}
    with pytest.raises(PipelineError, match=r"layers.1.weight -> layers.1.weight: dtype float64 vs Paddle float32"):
        convert(pt, pd)
    assert all(np.array_equal(before[k], v.numpy()) for k, v in pd.state_dict().items())


# ---------------------------------------------------------------- the float64 twin: one module at a time

@contextlib.contextmanager
def float64_watch(model, seen: list):
    """Hooks (registered before the run's, so they fire first) that record, at each module's return, the float64
    parameters of the model that belong to no module on the call stack."""
    stack, handles = [], []

    def enter(module, *_):
        stack.append(module)

    def leave(module, *_):
        running = {id(p) for m in stack for p in m.parameters(recurse=False)}
        doubles = [n for n, p in model.named_parameters() if p.dtype == torch.float64]
        seen.append((len(doubles), [n for n, p in model.named_parameters()
                                    if p.dtype == torch.float64 and id(p) not in running]))
        stack.pop()
    for m in model.modules():
        handles += [m.register_forward_pre_hook(enter), m.register_forward_hook(leave)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@pytest.mark.parametrize("planted", [None, "the whole model in float64"])
def test_the_float64_twin_holds_one_module_at_a_time(monkeypatch, planted):
    """In both runs (the cumulative one's float64 twin and the isolated one's), a parameter is float64 only while
    its module runs; planted back, the whole model in float64 at once, it is red."""
    if planted:
        monkeypatch.setattr(twin, "float64_as_called", twin.float64)
    pt, pd = llama_pair()
    convert(pt, pd, layouts=HEAD)
    seen = []
    with float64_watch(pt, seen):
        report = compare_forward(pt, pd, IDS, isolate=True)
    assert report.passed and not report.differing, report.table()
    assert max(n for n, _ in seen) > 0  # the float64 runs happened
    outside = [names for _, names in seen if names]
    assert bool(outside) == bool(planted), outside[:1]
    assert all(p.dtype == torch.float32 for p in pt.parameters())


class Token(torch.nn.Module):
    """A learned token handed on as a view of its weight (ViT's cls_token.expand): its float64 memory is still read
    after the module returns."""
    def __init__(self):
        super().__init__()
        self.token = torch.nn.Parameter(torch.randn(1, 8))

    def forward(self, x):
        return self.token.expand(x.shape[0], -1)


class TokenMix(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.token, self.more = Token(), torch.nn.Linear(8, 1, bias=False)  # 8 values each
        self.mix, self.mix2 = torch.nn.Linear(8, 8, bias=False), torch.nn.Linear(8, 8, bias=False)

    def forward(self, x):
        t = self.token(x)
        return self.more(self.mix2(self.mix(x))) * t  # cast after token returned, t still in use


@pytest.mark.parametrize("planted", [None, "a weight's float64 memory reused while a view of it lives"])
def test_a_float64_weight_is_reused_only_when_nothing_else_holds_it(monkeypatch, planted):
    """float64_as_called casts into a float64 tensor an earlier call gave back (no fresh pages per call at LLM
    size), but not one a view still reads: the run's values are the whole model's in float64, bit for bit. With
    the view's memory reused, planted, they are not."""
    torch.manual_seed(0)
    model, x = TokenMix().eval(), torch.randn(3, 8, dtype=torch.float64)
    with torch.no_grad(), twin.float64(model):
        whole = model(x)
    if planted:
        monkeypatch.setattr(twin, "_unshared", lambda t: True)
    reused = []
    widened = twin._widened
    monkeypatch.setattr(twin, "_widened", lambda t, free: reused.append(bool(free.get(t.numel()))) or widened(t, free))
    with torch.no_grad(), twin.float64_as_called(model):
        called = model(x)
    assert reused == [False, False, True, bool(planted)]  # mix2 into mix's float64 tensor; more never into token's
    assert torch.equal(called, whole) != bool(planted)


class Head(torch.nn.Module):
    """An embedding and a head larger than twin.CAST_BLOCK (made small here): the two not cast whole."""
    def __init__(self, embedding=torch.nn.Embedding):
        super().__init__()
        self.emb, self.head = embedding(50, 16), torch.nn.Linear(16, 50)

    def forward(self, ids):
        return self.head(torch.tanh(self.emb(ids)))


class ScaledEmbedding(torch.nn.Embedding):
    """A subclass with its own forward (T5's, Gemma's scaled embeddings): its output is not its rows."""
    def forward(self, ids):
        return super().forward(ids) * 1.7


@pytest.mark.parametrize("planted", [None, "the last block of rows left out", "a subclass's output taken as rows"])
def test_a_lookup_and_a_large_head_in_float64_without_a_float64_copy(monkeypatch, planted):
    """An nn.Embedding is not cast (its float32 rows, widened after, are float64's rows, bit for bit) and an nn.Linear
    above CAST_BLOCK is cast a block of rows at a time (F.linear's values on the whole float64 weight, up to float64's
    own rounding: the sum's order may differ); neither weight is ever float64, and the model is as it was after.
    Planted: a head's last block left out, or a subclass's scaled output taken as an embedding's rows: red."""
    monkeypatch.setattr(twin, "CAST_BLOCK", 16 * 7)  # 7 rows a block: 50 rows in 8 blocks, the last of 1
    if planted == "the last block of rows left out":
        by_rows = twin._linear_by_rows
        monkeypatch.setattr(twin, "_linear_by_rows", lambda module, rows, free, x: by_rows(
            module, rows, free, x).index_fill_(-1, torch.tensor([49]), 0.0))
    if planted == "a subclass's output taken as rows":
        monkeypatch.setattr(twin, "_lookup", lambda m: isinstance(m, torch.nn.Embedding))
    torch.manual_seed(0)
    model = Head(ScaledEmbedding).eval()
    ids = torch.randint(0, 50, (3, 5))
    with torch.no_grad(), twin.float64(model):
        whole = model(ids)
    widened = []
    with torch.no_grad(), twin.float64_as_called(model):
        hook = model.head.register_forward_pre_hook(lambda m, args: widened.append(m.weight.dtype))
        called = model(ids)
        hook.remove()
    assert widened == [torch.float32] and "forward" not in vars(model.head)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    close = called.dtype == torch.float64 and torch.allclose(called, whole, rtol=1e-13, atol=1e-13)
    assert close != bool(planted), (called - whole).abs().max()
    plain = Head().eval()
    plain.load_state_dict(model.state_dict())
    with torch.no_grad(), twin.float64_as_called(plain):
        rows = plain.emb(ids)
    assert rows.dtype == torch.float64 and plain.emb.weight.dtype == torch.float32
    assert torch.equal(rows, torch.nn.functional.embedding(ids, plain.emb.weight.double()))


class Tied(torch.nn.Module):
    """A head reading the embedding's weight without calling it (tied weights): only the whole model's float64
    serves it."""
    def __init__(self):
        super().__init__()
        self.emb, self.mix = torch.nn.Embedding(20, 8), torch.nn.Linear(8, 8)

    def forward(self, ids):
        return torch.nn.functional.linear(self.mix(self.emb(ids)), self.emb.weight)


class PaddleTied(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.emb, self.mix = paddle.nn.Embedding(20, 8), paddle.nn.Linear(8, 8)

    def forward(self, ids):
        return paddle.matmul(self.mix(self.emb(ids)), self.emb.weight, transpose_y=True)


def test_a_tied_head_falls_back_to_the_whole_model_in_float64():
    pt, pd = Tied().eval(), PaddleTied().eval()
    ids = np.random.RandomState(0).randint(0, 20, (2, 5)).astype("int64")
    convert(pt, pd)
    report = compare_forward(pt, pd, ids, isolate=True)
    assert report.passed and report.rows[-1].err32 > 0 and not report.isolation_stopped, report.table()


# ---------------------------------------------------------------- records on disk

def figures(report) -> list:
    """Every row's figures, as text (a NaN, for a row with no counterpart, equals itself)."""
    return [repr((r.name, r.shape, r.max, r.mean, r.err32, r.scale, r.input_ok, r.passed, r.problem))
            for r in list(report.rows) + list(report.isolated or [])]


@pytest.mark.parametrize("planted", [None, "spilled as float16 (what is written rounded)"])
def test_spilled_records_judge_as_in_memory(tmp_path, monkeypatch, planted):
    """A port with a planted bug (RMSNorm's epsilon): record_dir= gives the same rows, the same isolated rows and
    the same verdicts as in memory. A spill that rounds what it writes, planted, is red."""
    pt, pd = llama_pair()
    convert(pt, pd, layouts=HEAD)
    pd.llama.layers[1].input_layernorm.variance_epsilon = 1e-2
    memory = compare_forward(pt, pd, IDS, isolate=True)
    if planted:
        write = Spill.__setitem__
        monkeypatch.setattr(Spill, "__setitem__", lambda self, k, v: write(
            self, k, v.astype(np.float16) if v.dtype == np.float32 else v))
    disk = compare_forward(pt, pd, IDS, isolate=True, record_dir=tmp_path / "records")
    assert not memory.passed and memory.differing == ["model.layers.1.input_layernorm"]
    same = figures(disk) == figures(memory) and disk.differing == memory.differing
    assert same != bool(planted)
    # torch's float64 values and both isolated runs' are judged as they are computed, never written
    assert {p.name for p in (tmp_path / "records").iterdir()} == {"torch", "paddle", spill.OWNED}
    assert not any(k.startswith(F64) for k in Spill.open(tmp_path / "records" / "torch"))
    with pytest.raises(PipelineError, match="no module outputs with their float64 run"):  # not a hand-in's record
        judge_forward(Spill.open(tmp_path / "records" / "torch"), Spill.open(tmp_path / "records" / "paddle"))


@pytest.mark.parametrize("planted", [None, "spilled as float32 (the float64 twin rounded)"])
def test_records_written_to_disk_judge_again(tmp_path, monkeypatch, planted):
    """record_forward(record_dir=) on each side, judged again from disk by another reader (Spill.open): the rows
    compare_forward gives in memory. A spill rounding the float64 twin, planted, is red."""
    pt, pd = llama_pair()
    convert(pt, pd, layouts=HEAD)
    pd.llama.layers[1].input_layernorm.variance_epsilon = 1e-2
    memory = compare_forward(pt, pd, IDS)
    if planted:
        write = Spill.__setitem__
        monkeypatch.setattr(Spill, "__setitem__", lambda self, k, v: write(
            self, k, v.astype(np.float32) if v.dtype == np.float64 else v))
    record_forward(pt, IDS, tmp_path / "torch"), record_forward(pd, IDS, tmp_path / "paddle")
    again = judge_forward(Spill.open(tmp_path / "torch"), Spill.open(tmp_path / "paddle"))
    assert (figures(again) == figures(memory)) != bool(planted)


@pytest.mark.parametrize("planted", [None, "judged on the float32 value"])
def test_the_float64_run_judged_as_it_runs_gives_the_recorded_rows(monkeypatch, planted):
    """compare_forward judges torch's float64 run as it computes it (compare.judged_as_run), keeping none of it:
    its rows are, bit for bit, those of the records a pt_/pd_ script pair writes (record_forward, judge_forward),
    with a bug planted in the port. A yardstick taken from the float32 run, planted, is red."""
    pt, pd = llama_pair()
    convert(pt, pd, layouts=HEAD)
    pd.llama.layers[0].mlp.up_proj.weight.set_value(pd.llama.layers[0].mlp.up_proj.weight * 1.001)
    recorded = judge_forward(record_forward(pt, IDS), record_forward(pd, IDS))
    if planted:
        judge = compare.judge_one
        monkeypatch.setattr(compare, "judge_one", lambda name, a, ref, b: judge(name, a, a, b))
    streamed = compare_forward(pt, pd, IDS)
    assert not recorded.passed and recorded.first_diverging == "model.layers.0.mlp.up_proj"
    assert (figures(streamed) == figures(recorded)) != bool(planted)


def test_a_record_dir_through_a_link_is_refused(tmp_path):
    pt, pd = Stack(2, 8), PaddleStack(2, 8)
    convert(pt, pd)
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(PipelineError, match="is a symbolic link"):
        compare_forward(pt, pd, np.ones((2, 8), "float32"), record_dir=tmp_path / "link" / "records")
    assert not any((tmp_path / "real").iterdir())


@pytest.mark.parametrize("planted", [None, "every folder taken as the project's own"])
def test_a_record_dir_holding_anyone_elses_files_is_refused(tmp_path, monkeypatch, planted):
    """A Spill writes only in a folder new, empty or marked by an earlier record: a user's folder that happens to
    hold a 1.npy is refused with one line and left as it was."""
    pt, pd = Stack(2, 8), PaddleStack(2, 8)
    convert(pt, pd)
    theirs = tmp_path / "records" / "torch"
    theirs.mkdir(parents=True)
    (theirs / "1.npy").write_bytes(b"the user's own")
    if planted:
        monkeypatch.setattr(spill, "_claim", lambda folder, fd: None)
    refused = contextlib.nullcontext() if planted else pytest.raises(PipelineError, match="did not write")
    with refused:
        compare_forward(pt, pd, np.ones((2, 8), "float32"), record_dir=tmp_path / "records")
    assert ((theirs / "1.npy").read_bytes() == b"the user's own") != bool(planted)


@pytest.mark.parametrize("planted", [None, "written through a hard link"])
def test_a_record_written_again_reuses_its_files_but_never_writes_through_a_link(tmp_path, monkeypatch, planted):
    """A second record in the folder writes the first one's files over in place (their pages reused), and judges
    as the first: but a file of that name made a hard link or a symbolic link to someone else's file is replaced,
    and that file keeps its bytes."""
    pt, pd = Stack(2, 8), PaddleStack(2, 8)
    convert(pt, pd)
    x = np.random.RandomState(0).randn(2, 8).astype("float32")
    first = compare_forward(pt, pd, x, record_dir=tmp_path / "records")
    folder = tmp_path / "records" / "paddle"
    kept = {p.name: p.stat().st_ino for p in folder.glob("*.npy")}
    (tmp_path / "hard").write_bytes(b"h" * 4096)
    (tmp_path / "soft").write_bytes(b"s" * 4096)
    (folder / "1.npy").unlink()
    os.link(tmp_path / "hard", folder / "1.npy")
    (folder / "2.npy").unlink()
    os.symlink(tmp_path / "soft", folder / "2.npy")
    if planted:  # any file of the name written over, as it is
        monkeypatch.setattr(Spill, "_opened", lambda self, name: os.open(name, os.O_WRONLY | os.O_CREAT, 0o644,
                                                                          dir_fd=self._dir))
    try:
        same = figures(compare_forward(pt, pd, x, record_dir=tmp_path / "records")) == figures(first)
    except PipelineError:  # what was written through the symbolic link is not read back through it
        same = False
    assert {p.name: p.stat().st_ino for p in folder.glob("*.npy") if p.name not in ("1.npy", "2.npy")} == \
        {n: i for n, i in kept.items() if n not in ("1.npy", "2.npy")}  # written over, not made anew
    intact = (tmp_path / "hard").read_bytes() == b"h" * 4096 and (tmp_path / "soft").read_bytes() == b"s" * 4096
    assert (same and intact) != bool(planted)


# ---------------------------------------------------------------- measure, block by block

def whole(a, ref, b) -> tuple:
    """measure's figures as it computed them before it went block by block: on the whole arrays."""
    a64 = a.astype(np.float64)
    exact = a64 if ref is None else np.asarray(ref, dtype=np.float64)
    d, own = np.abs(a64 - b.astype(np.float64)), np.abs(a64 - exact)
    return float(d.max()), float(d.mean()), float(own.max()), float(own.mean()), float(np.abs(exact).max())


@pytest.mark.parametrize("shape", [(7,), (3, 1000), (2, 128, 1024), (2, 128, 2816), (5, 3 * calibrated.BLOCK + 13)])
def test_measure_block_by_block_gives_the_whole_arrays_figures(shape):
    """Bit for bit (the sums in numpy's own pairwise order), with a float64 reference, without one (None), and with
    a float32 one (a value forced and passed on, portcheck.isolate); a NaN or an Inf on either side is said.
    Magnitudes spread over nine decades: a sum split otherwise than numpy's (halves not rounded down to a
    multiple of 8) differs on the last shape."""
    rng = np.random.default_rng(sum(shape))
    spread = lambda: rng.standard_normal(shape) * 10.0 ** rng.uniform(-6, 3, shape)
    ref = spread()
    a = ref.astype(np.float32)
    b = a + spread().astype(np.float32)
    for r in (ref, None, a):
        row = calibrated.measure("x", a, r, b)
        assert (row.max, row.mean, row.err32, row.own_mean, row.scale) == whole(a, r, b)
    for x, y in ((np.inf, 1.0), (np.nan, 1.0), (1.0, -np.inf), (np.inf, np.inf)):
        a2, b2 = a.copy(), b.copy()
        a2.flat[-1], b2.flat[-1] = x, y
        said = calibrated.measure("x", a2, ref, b2).problem  # which side, and how many
        sides = [side for side, v in (("torch", x), ("paddle", y)) if not np.isfinite(v)]
        assert said.startswith("NaN or Inf " + ("on both sides" if len(sides) == 2 else f"in {sides[0]} only")), said


@pytest.mark.parametrize("at", [0, calibrated.BLOCK + 5, -1])
def test_own_error_finds_an_overflowed_float64_run_from_its_scale(at):
    """own_error tests overflow (a float64 value NaN or Inf where float32's is finite) only when max |float64|
    is not finite: the same verdicts as the full test made first on every value, in each block and half."""
    rng = np.random.default_rng(7)
    ref = rng.standard_normal(3 * calibrated.BLOCK)
    a = ref.astype(np.float32)
    for bad_ref, bad_a, over in ((np.inf, 1.0, True), (np.nan, 1.0, True), (np.nan, np.nan, False),
                                 (-np.inf, -np.inf, False)):
        a2, ref2 = a.copy(), ref.copy()
        a2[at], ref2[at] = bad_a, bad_ref
        row = calibrated.own_error(calibrated.against("x", a, a), a2, ref2)  # a2: float32's run, NaN or Inf too
        assert calibrated.overflowed(a2, ref2) == over
        assert (calibrated.OVERFLOWED in row.problems) == over
        assert over or not np.isfinite(row.err32)  # a NaN or Inf in both is in the figures, not a problem
    row = calibrated.measure("x", a, ref, a)
    assert not row.problems and (row.err32, row.own_mean, row.scale) == whole(a, ref, a)[2:]


# ---------------------------------------------------------------- a bound no port can meet

@pytest.mark.parametrize("torch_own, says", [(1.54e-2, True), (1e-3, False)])
def test_a_guide_bound_below_torchs_own_error_is_said(torch_own, says):
    """bp_align's 1e-2 where float32 and float64 differ by 1.54e-2 (a clean BatchNorm port, issue 34): the verdict
    names the mean bound and says no port can meet it; where torch's own error is within the bound (a port
    truly off on the mean), it must not say so. Neither names the max bound, which held."""
    a, ref = np.array([1.0]), np.array([1.0 + torch_own])
    row = calibrated.measure("loss", a, ref, a + 1.483e-2, mean_bound=1e-2, multiple=calibrated.K_BACKWARD)
    assert not row.passed and row.max <= row.allowed
    assert row.why.startswith("mean diff 1.483e-02 > the guide's bound 0.01")
    assert ("no port can meet it on this input" in row.why) == says
    assert "allowed" not in row.why.split(";")[0]


@pytest.mark.parametrize("planted", [None, "pairing reads every value of the record for each call"])
def test_pairing_a_spilled_record_maps_each_value_it_reads_once_per_call(tmp_path, monkeypatch, planted):
    """compare_forward(record_dir=)'s pairing maps from disk only the outputs of the calls it compares: a pass over
    record.items() per call mapped every file of the record (22k maps at hidden 256, a fifth of the comparison)."""
    from portcheck.core.keys import split_key
    from portcheck.mapping import pairing, ties
    if planted:
        every = lambda record, call: [v for k, v in record.items() if k.startswith("out/") and split_key(k)[1] == call]
        monkeypatch.setattr(pairing, "outputs_of", every)  # pairing's own reads (harmless, composed) and the ties'
        monkeypatch.setattr(ties, "outputs_of", every)
    pt, pd = llama_pair()
    convert(pt, pd, layouts=HEAD)
    reads, pair = [], pairing.pair
    read = Spill.__getitem__
    monkeypatch.setattr(Spill, "__getitem__", lambda self, key: reads.append(key) or read(self, key))
    monkeypatch.setattr(pairing, "pair", lambda *a, **k: (reads.append("pair"), pair(*a, **k), reads.append("/pair"))[1])
    assert compare_forward(pt, pd, IDS, record_dir=tmp_path / "records").passed
    during = [k for k in reads[reads.index("pair") + 1:reads.index("/pair")] if k.startswith("out/")]
    outputs = sum(k.startswith("out/") for k in Spill.open(tmp_path / "records" / "torch")) + \
        sum(k.startswith("out/") for k in Spill.open(tmp_path / "records" / "paddle"))
    assert (len(during) <= outputs) != bool(planted), (len(during), outputs)


@pytest.mark.parametrize("planted", [None, "one header per shape, whatever the dtype"])
def test_a_spilled_array_is_np_saves_file_and_reads_back_as_written(tmp_path, monkeypatch, planted):
    """Spill writes each array as a header made once per shape and dtype and its bytes (no write_array per array),
    and reads one of at most SMALL bytes back, a larger one mapped: the files are np.save's, byte for byte, and every
    lookup (a repeated one from the arrays kept at hand too) gives the values and dtype written, read-only. A header
    cache keyed by the shape alone, planted, writes an int64 array under a float32 header."""
    import io
    from portcheck.core import spill
    if planted:
        made = spill._header
        monkeypatch.setattr(spill, "_header", lambda shape, dtype: made(shape, "<f4"))
    rng = np.random.default_rng(0)
    arrays = {"f4": rng.standard_normal((3, 5)).astype(np.float32), "i8": np.arange(15).reshape(3, 5),
              "b1": np.array([True, False]), "f2": np.ones((2, 3), np.float16),
              "large": rng.standard_normal(spill.SMALL // 4 + 1).astype(np.float32),
              "fortran": np.asfortranarray(rng.standard_normal((4, 6)))}
    record = Spill(tmp_path / "r")
    for k, v in arrays.items():
        record[k] = v
    record.close()
    def as_written(again, k, v):
        saved = io.BytesIO()
        np.lib.format.write_array(saved, np.ascontiguousarray(v), allow_pickle=False)
        if (tmp_path / "r" / record.source(k)).read_bytes() != saved.getvalue():
            return False
        try:
            got = again[k]
        except PipelineError:  # a header the bytes cannot fill
            return False
        return got.dtype == v.dtype and np.array_equal(got, v) and not got.flags.writeable
    held = [as_written(again, k, v) for again in (record, record, Spill.open(tmp_path / "r")) for k, v in arrays.items()]
    assert all(held) != bool(planted), held


@pytest.mark.parametrize("port", [1.19e-6, 2e-6])
def test_a_guide_bound_under_twice_torchs_own_error_is_beyond_any_port(port):
    """paddlenlp's CLIP logits: torch's own fp32 mean error 7.0e-7, the correct port 1.19e-6 from torch's, over the
    guide's 1e-6: red before, where torch's own error alone had to miss the bound. A port as exact as torch differs
    from it by up to twice torch's own error: the measured verdict decides, the guide's said beside."""
    ref = np.linspace(1.0, 2.0, 64)
    a = ref + 7.0e-7
    row = calibrated.measure("(model):logits", a, ref, a + port, mean_bound=1e-6)
    assert row.max_ok and not row.mean_ok and row.beyond(1e-6)
    assert "a port as exact differs from it by up to 2 x that" in row.why


def test_a_bound_over_twice_torchs_own_error_holds_a_port_off_on_the_mean():
    """torch's own mean error 4e-7 (twice it 8e-7, under the guide's 1e-6): a port 1.2e-6 off is red by the bound."""
    ref = np.linspace(1.0, 2.0, 64)
    a = ref + 4e-7
    row = calibrated.measure("(model):logits", a, ref, a + 1.2e-6, mean_bound=1e-6)
    assert row.max_ok and not row.mean_ok and not row.beyond(1e-6) and "no port" not in row.why
