"""Any size on one machine: a transformers Llama and its paddlenlp port compared block by block from their
checkpoint folders, never both whole models in memory.

    from portcheck.checkpoints import stream
    report = stream.compare("llama-hf/", "llama-paddle/", {"input_ids": ids})
    print(report.table()); assert report.passed, report.first_diverging

Each side's skeleton is built without weights (torch's meta device; Paddle's LazyGuard with paddlenlp's
no_init_weights). Then one block at a time, the embeddings, each decoder layer, the final norm and the head: its
tensors are read from the shards one by one (a safetensors header says where each one is; nothing is unpickled),
upcast to float32 (a bf16 or fp16 checkpoint, said in the report), the block run and judged, and its tensors
freed. Each block is judged twice, with compare_forward's rules and rows (every module inside it recorded):
* cumulative: each side on its own hidden states, carried from block to block; torch's float64 run carries its
  own too, so each module is held to torch's fp32 error accumulated from the start, as compare_forward holds it;
* isolated: Paddle's block on torch's fp32 input, held to the error of torch's float64 run of the block on that
  same input: the block's own computation, whatever came before it.
The hidden states between blocks go to disk (portcheck.core.spill) when they are larger than SPILL_BYTES.
Memory: the libraries, one block of each side in float32, the module torch's float64 run holds at a time
(twin.float64_as_called), and the activations of one block.
"""
import functools
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from portcheck.checkpoints import checkpoint
from portcheck.checkpoints.checkpoint import CONFIG, INDEX, INV_FREQ, PATHS, Shards  # noqa: F401 (stream.INDEX)
from portcheck.core import calibrated, page, report, spill
from portcheck.forward.compare import judged_as_run
from portcheck.forward.outputs import judge_records
from portcheck.forward.result import ForwardReport
from portcheck.forward.twin import F64, float64_run
from portcheck.mapping.trace import recorded, stopped, trace
from portcheck.core.diff import first_diverging
from portcheck.core.errors import PipelineError
from portcheck.core.keys import ROOT

SPILL_BYTES = 64 << 20   # hidden states larger than this wait for the next block on disk


def _matched(shards: Shards, expected: dict, aliases: dict) -> dict:
    """{model name: checkpoint name} for every tensor of the skeleton (expected: {name: shape}); a key missing or
    left over, or a shape that differs, is one line, before anything is run."""
    names = {k: k if k in shards.tensors else aliases.get(k, k) for k in expected}
    missing = [k for k, n in names.items() if n not in shards.tensors]
    # a rotary embedding's inv_freq, which older checkpoints of both libraries hold, is computed from the config
    extra = sorted(k for k in set(shards.tensors) - set(names.values()) if not k.endswith(INV_FREQ))
    side = shards.side
    if missing:
        raise PipelineError(f"{shards.folder} lacks {missing[0]}" + (f" (and {len(missing) - 1} more)" if
                            len(missing) > 1 else "") + f": the {side} checkpoint does not fit its config's model "
                                                        "[PC901]")
    if extra:
        raise PipelineError(f"{shards.folder} holds {extra[0]}, which the {side} model built from its config "
                            "lacks" + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "") + " [PC919]")
    for k, n in names.items():
        if tuple(shards.shape(n)) != tuple(expected[k]):
            raise PipelineError(f"{shards.folder}: {n} is {list(shards.shape(n))}, the {side} model's {k} is "
                                f"{list(expected[k])}: the checkpoint does not fit its config's model [PC911]")
    return names


# ---------------------------------------------------------------- the two skeletons and their blocks

def torch_skeleton(folder):
    """transformers' LlamaForCausalLM from the folder's config on the meta device (no weights), eager attention;
    its rotary embedding (computed from the config, no weights) built for real. The config is checked against the
    folder's shards first (checkpoint.fitted): nothing is built that the shards cannot fill."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    config, _ = _config(LlamaConfig, folder, "torch")
    config._attn_implementation = "eager"
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model.model.rotary_emb = LlamaRotaryEmbedding(config=config)
    return model.eval()


def paddle_skeleton(folder):
    """paddlenlp's LlamaForCausalLM from the folder's config, its parameters lazy (LazyGuard, no_init_weights:
    paddlenlp's own low_cpu_mem_usage), in float32 whatever dtype the config names; checked as torch_skeleton's,
    and its rotary caches (built for real, in each layer) against the memory free."""
    import paddle
    from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM
    from paddlenlp.transformers.model_utils import no_init_weights
    config, s = _config(LlamaConfig, folder, "paddle")
    checkpoint.rotary_fits(config, s, Path(folder) / CONFIG)
    config.dtype = "float32"
    with no_init_weights(), paddle.LazyGuard():
        model = LlamaForCausalLM(config)
    return model.eval()


def _config(cls, folder, side) -> tuple:
    """(the library's config of the folder, its sizes), each size checked for type, sign and proportion to the
    folder's shards before anything is built from it."""
    raw = checkpoint.read_config(checkpoint.a_folder(folder, side))
    if raw.get("model_type", "llama") != "llama":
        raise PipelineError(f"{Path(folder) / CONFIG} is a {str(raw['model_type'])[:40]!r} model: "
                            "portcheck.checkpoints.stream compares Llama checkpoints (transformers' and paddlenlp's "
                            "LlamaForCausalLM) [PC902]")
    try:
        config = cls.from_dict(raw)
    except Exception as e:  # noqa: BLE001 - a library's own error on a config it cannot read, said in one line
        raise PipelineError(f"{Path(folder) / CONFIG} cannot be read as a Llama config: {str(e).splitlines()[0][:200]} "
                            "[PC912]"
                            ) from None
    s = checkpoint.sizes(config)
    checkpoint.fitted(Shards(folder, side), s)
    return config, s


def _get(model, path: str):
    for part in path.split("."):
        model = getattr(model, part)
    return model


def blocks(model, side: str) -> list:
    """[(block name, module path)] in run order: embeddings, each decoder layer, final norm, head."""
    embed, layers, norm, head = PATHS[side]
    return [(embed, embed)] + [(f"{layers}.{i}", f"{layers}.{i}") for i in range(len(_get(model, layers)))] + \
        [(norm, norm), (head, head)]


def _mirror(root, path: str, module, dict_type, container):
    """root with `module` at `path` (a.b.3.c), the containers between made empty: a block's modules keep the
    names they have in the whole model, so the report names model.layers.17.mlp, not a wrapper's."""
    parts = path.split(".")
    node = root
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        if not hasattr(node, part) or getattr(node, part) is None:
            setattr(node, part, dict_type() if nxt.isdigit() else container())
        node = getattr(node, part)
    if isinstance(node, dict_type):
        node[parts[-1]] = module
    else:
        setattr(node, parts[-1], module)
    return root


def torch_block(model, path: str, device):
    """A module running one block of transformers' Llama on one tensor (token ids or hidden states), as
    LlamaModel.forward runs it: a decoder layer with its causal mask (finfo(dtype).min above the diagonal, in
    the hidden states' dtype) and rotary embeddings (model.rotary_emb)."""
    import torch
    layers = PATHS["torch"][1]

    class Block(torch.nn.Module):
        def forward(self, x):
            x = x.to(device)
            if not path.startswith(layers + "."):
                return _get(self, path)(x)
            batch, length = x.shape[:2]
            mask = torch.full((length, length), torch.finfo(x.dtype).min, dtype=x.dtype, device=x.device).triu(1)
            positions = torch.arange(length, device=x.device)[None].expand(batch, length)
            rotary = self.model.rotary_emb(x, positions)
            return _get(self, path)(x, attention_mask=mask[None, None], position_ids=positions,
                                    position_embeddings=rotary)[0]
    block = _mirror(Block(), path, _get(model, path), torch.nn.ModuleDict, torch.nn.Module)
    if path.startswith(layers + "."):
        block.model.rotary_emb = model.model.rotary_emb.to(device)
    return block.eval()


def paddle_block(model, path: str):
    """A layer running one block of paddlenlp's Llama on one tensor, as LlamaModel.forward runs it: a decoder
    layer with its positions and LlamaModel's own causal mask."""
    import paddle
    layers = PATHS["paddle"][1]
    prepare = _get(model, PATHS["paddle"][0].split(".")[0])._prepare_decoder_attention_mask

    class Block(paddle.nn.Layer):
        def forward(self, x):
            if not path.startswith(layers + "."):
                return _get(self, path)(x)
            batch, length = x.shape[:2]
            positions = paddle.arange(length, dtype="int64").expand((batch, length))
            out = _get(self, path)(x, positions, prepare(None, (batch, length), 0, x.dtype))
            return out[0] if isinstance(out, tuple) else out
    block = _mirror(Block(), path, _get(model, path), paddle.nn.LayerDict, paddle.nn.Layer)
    block.eval()
    return block


# ---------------------------------------------------------------- weights in and out, one block at a time

def _torch_expected(model) -> dict:
    return {k: tuple(v.shape) for k, v in model.state_dict().items() if not k.endswith(INV_FREQ)}


def _paddle_expected(model) -> dict:
    return {k: tuple(p.shape) for k, p in model.named_parameters()}


def _load_torch(model, path: str, shards: Shards, names: dict, device):
    import torch
    module = _get(model, path)
    state = {k[len(path) + 1:]: torch.from_numpy(shards.read(names[k])).to(device)
             for k in names if k.startswith(path + ".")}
    module.load_state_dict(state, strict=True, assign=True)


def _free_torch(model, path: str):
    _get(model, path).to("meta")  # the block's weights released, its skeleton kept


def _load_paddle(model, path: str, shards: Shards, names: dict):
    for name, p in _get(model, path).named_parameters():
        p.set_value(shards.read(names[f"{path}.{name}"]))


def _free_paddle(model, path: str):
    for _, p in _get(model, path).named_parameters():
        p._clear_data()


# ---------------------------------------------------------------- the comparison

@dataclass
class Block:
    name: str                 # the torch side's module path: model.layers.17
    cumulative: ForwardReport  # each side on its own hidden states
    isolated: ForwardReport   # Paddle's block on torch's input
    seconds: float = 0.0


@dataclass
class StreamReport(page.Viewable):
    blocks: list = field(default_factory=list)   # [Block] in run order
    upcast: dict = field(default_factory=dict)   # {side: the dtypes on disk} where they are not all float32
    stopped: str = ""                            # why the stream stopped before the last block, if it did

    @property
    def cumulative(self) -> ForwardReport:
        """Every block's cumulative rows as one compare_forward report (its table, plot, first_diverging)."""
        return _merged([b.cumulative for b in self.blocks])

    @property
    def isolated(self) -> ForwardReport:
        """Every block's isolated rows (Paddle's block on torch's input) as one report."""
        return _merged([b.isolated for b in self.blocks])

    @property
    def passed(self) -> bool:
        return not self.stopped and bool(self.blocks) and all(b.cumulative.passed and b.isolated.passed
                                                              for b in self.blocks)

    @property
    def first_diverging(self):
        """The module where the cumulative runs part (compare_forward's rule), or None."""
        return self.cumulative.first_diverging

    @property
    def parting(self) -> list:
        """[(module, its max diff over its allowance)]: in each block, the first module out of its rule whose input
        was within its own (compare_forward's first_diverging, block by block): where the runs part, every place
        they part, not only the first (a bug in layer 17 is named even where layer 0 is already over)."""
        out = []
        for b in self.blocks:
            # compare_forward's rows: one over only the guide's mean bound, which torch's own fp32 misses too, is not
            first = first_diverging([r for r in b.cumulative.paired if not r.beyond(calibrated.MEAN_BOUND)])
            if first is not None and first.input_ok is not False and first.judged:
                out.append((first.name, first.max / first.allowed if first.allowed else float("inf")))
        return out

    @property
    def first_isolated(self):
        """The first module over its rule in the first block whose own computation differs (Paddle's block on
        torch's input), or None."""
        block = next((b for b in self.blocks if not b.isolated.passed), None)
        return None if block is None else block.isolated.first_diverging or block.name

    def block_of(self, module: str):
        """The block a module name belongs to (a row's name), or None."""
        if module is None:
            return None
        return next((b.name for b in self.blocks if module == b.name or module.startswith(b.name + ".")), None)

    def lines(self) -> list:
        """One line per block: its verdicts, cumulative and isolated, and the module named where it is red."""
        out = []
        for b in self.blocks:
            said = [f"{how} {'green' if r.passed else 'RED at ' + str(r.first_diverging or b.name) + ' [PC920]'}"
                    for how, r in (("cumulative", b.cumulative), ("isolated", b.isolated))]
            out.append(f"{b.name}: {', '.join(said)} ({b.seconds:.1f} s)")
        return out

    def table(self) -> str:
        lines = [f"weights upcast per block from {', '.join(f'{s} {d}' for s, d in self.upcast.items())} on disk "
                 "to float32 (and torch's to float64 for its yardstick run)"] if self.upcast else []
        lines += self.lines()
        lines += [f"stopped: {self.stopped}"] if self.stopped else []
        lines += ["cumulative (each side on its own hidden states):", self.cumulative.table(),
                  "isolated (each block's Paddle side on torch's input):", self.isolated.table()]
        first = self.first_diverging
        lines += [f"the runs part at: {', '.join(f'{m} ({used:.2f}x its allowance)' for m, used in self.parting)}"
                  ] if len(self.parting) > 1 else []
        lines.append(f"first diverging: {first} (block {self.block_of(first)}); on torch's input: "
                     f"{self.first_isolated}" if first or self.first_isolated else
                     "every block within its rule, cumulative and isolated" if self.passed else "")
        return "\n".join(line for line in lines if line)

    def view(self) -> dict:
        """The page's data (portcheck.core.page): each block's verdicts, every module of every block nested
        under its block, cumulative beside isolated (each block's Paddle side on torch's input)."""
        data = self.cumulative.view("portcheck layers")
        iso = {row["name"]: row for row in report.figures(self.isolated.paired, "forward, isolated")}
        tree = data["sections"][0]
        tree.update(isolated=iso, title="block by block: cumulative, and each block on torch's input")
        first = self.first_diverging
        data.update(passed=self.passed, sections=[tree, {"kind": "lines", "title": "the table",
                                                         "lines": self.table().splitlines()}],
                    headline=(f"the runs part at {first} (block {self.block_of(first)})" if first else
                              "every block within its rule, cumulative and isolated" if self.passed else
                              f"red{': ' + self.stopped if self.stopped else ''}"),
                    verdicts=[{"name": b.name, "passed": b.cumulative.passed and b.isolated.passed, "text": line}
                              for b, line in zip(self.blocks, self.lines())])
        return data


    def plot(self, path) -> str:
        """compare_forward's plot: the cumulative run beside each block on torch's input."""
        from portcheck.forward import plot
        cum, iso = self.cumulative, self.isolated
        return plot.draw([plot.panel("cumulative: each module, each side on its own hidden states", cum.paired,
                                     first_diverging(cum.paired)),
                          plot.panel("isolated: each block's modules on torch's input to the block", iso.paired,
                                     first_diverging(iso.paired))], path)


def _merged(reports: list) -> ForwardReport:
    out = ForwardReport()
    for r in reports:
        out.rows += r.rows
        out.unpaired += r.unpaired
        out.stopped.update(r.stopped)
        out.counterparts.update(r.counterparts)
    return out


def _kept(report: ForwardReport, head: bool) -> ForwardReport:
    """A block's report without its wrapper's own row (the block module's output again), but for the head's:
    the model's output, held to the guide's mean bound as compare_forward holds it."""
    if not head:
        report.rows = [r for r in report.rows if r.name.split("[")[0].split(":")[0] != ROOT]
    return report


def _torch_record(block, x, x64) -> dict:
    """torch's float32 record on x and its float64 run on x64 (the float64 hidden states carried from the
    start), one module in float64 at a time, as record_forward makes it."""
    import torch
    out = trace(block, x)
    mark = len(out)

    def run():
        for key in list(out)[mark:]:
            del out[key]
        return recorded(block, x64, torch.no_grad, torch.from_numpy, F64, out)
    float64_run(block, run, lambda record: stopped(record, F64) is not None or any(
        calibrated.overflowed(record[k[len(F64):]], record[k]) for k in list(record)[mark:] if k[len(F64):] in record))
    return out


def checked_tokens(ids: np.ndarray, sizes: dict) -> np.ndarray:
    """Token ids within the vocabulary, and what one block records of them within the memory free."""
    vocab = sizes["torch"]["vocab_size"]
    if int(ids.max()) >= vocab or ids.min() < 0:
        raise PipelineError(f"inputs: token ids must lie in [0, {vocab}) [PC906]")
    checkpoint.tokens_fit(held(sizes), *ids.shape, "inputs")
    return ids


def checked_ids(inputs) -> np.ndarray:
    """The token ids compared: an int array [batch, length], or {"input_ids": it}."""
    ids = inputs.get("input_ids") if isinstance(inputs, dict) else inputs
    if isinstance(inputs, dict) and set(inputs) != {"input_ids"}:
        raise PipelineError(f"inputs: give {{'input_ids': ids}} alone (found {sorted(inputs)}); padding masks are "
                            "not compared block by block [PC903]")
    ids = np.asarray(ids) if ids is not None else None
    if ids is None or ids.dtype.kind not in "iu" or ids.ndim != 2 or not ids.size:
        raise PipelineError("inputs: give the token ids as an integer array [batch, length] [PC904]")
    return ids.astype(np.int64)


def compare(torch_dir, paddle_dir, inputs, torch_model=None, paddle_model=None, record_dir=None, device="cpu",
            mean_bound=calibrated.MEAN_BOUND, progress=None) -> StreamReport:
    """A transformers Llama checkpoint folder against its paddlenlp port's, block by block (this module's
    docstring). inputs: token ids [batch, length] (or {"input_ids": ids}). torch_model, paddle_model: the
    skeletons to load into (default: built from each folder's config without weights; give your own port's,
    built under paddle.LazyGuard(), structured as paddlenlp's). record_dir: where the hidden states wait between
    blocks, a new or empty folder or one it wrote before (default: memory, or a temporary folder removed afterwards
    where they are larger than SPILL_BYTES). Both folders' configs and shards are checked, and the tokens against
    the positions and the memory free, before any skeleton is built (portcheck.checkpoints.checkpoint). device: where
    torch's block runs ("cuda:0"; Paddle's runs where paddle.set_device says). mean_bound: the guide's bound on the
    model output's mean (compare_forward's). progress: called with each block's line as it is judged."""
    ids = checked_ids(inputs)
    shards = {"torch": Shards(torch_dir, "torch"), "paddle": Shards(paddle_dir, "paddle")}
    sizes = {"torch": folder_sizes(torch_dir, "torch"),
             "paddle": folder_sizes(paddle_dir, "paddle", rotary=paddle_model is None)}
    t_layers, p_layers = (sizes[s]["num_hidden_layers"] for s in ("torch", "paddle"))
    if t_layers != p_layers:
        raise PipelineError(f"the torch model has {t_layers} decoder layers, the Paddle one {p_layers}: the two "
                            "configs differ [PC905]")
    checked_tokens(ids, sizes)
    # record_dir: new, empty or a Spill's own (marked), else refused, nothing in it touched: before anything is built
    carried = None if record_dir is None else spill.Spill(record_dir)
    t_model = torch_skeleton(torch_dir) if torch_model is None else torch_model
    p_model = paddle_skeleton(paddle_dir) if paddle_model is None else paddle_model
    tied = {"lm_head.weight": "model.embed_tokens.weight"} if getattr(t_model.config, "tie_word_embeddings", 0) else {}
    t_names = _matched(shards["torch"], _torch_expected(t_model), tied)
    p_names = _matched(shards["paddle"], _paddle_expected(p_model), {})
    t_blocks, p_blocks = blocks(t_model, "torch"), blocks(p_model, "paddle")
    if len(t_blocks) != len(p_blocks):
        raise PipelineError(f"the torch model has {len(t_blocks) - 3} decoder layers, the Paddle one "
                            f"{len(p_blocks) - 3}: the two configs differ [PC905]")
    report = StreamReport(upcast={s: "/".join(sh.dtypes) for s, sh in shards.items() if sh.dtypes != ["float32"]})
    own = carried is None and ids.size * sizes["torch"]["hidden_size"] * 4 > SPILL_BYTES
    folder = Path(tempfile.mkdtemp(prefix="portcheck-stream-")) if own else None
    carried = spill.Spill(folder) if own else {} if carried is None else carried
    carried.update(torch=ids, torch64=ids, paddle=ids)
    try:
        for i, ((name, t_path), (_, p_path)) in enumerate(zip(t_blocks, p_blocks)):
            start = time.perf_counter()
            head = i == len(t_blocks) - 1
            bound = mean_bound if head else None
            _load_torch(t_model, t_path, shards["torch"], t_names, device)
            _load_paddle(p_model, p_path, shards["paddle"], p_names)
            t_block, p_block = torch_block(t_model, t_path, device), paddle_block(p_model, p_path)
            x, x64, xp = (np.asarray(carried[k]) for k in ("torch", "torch64", "paddle"))
            t_cum = _torch_record(t_block, x, x64)  # torch's float32 run on its input, float64 on its own
            t_record = {k: v for k, v in t_cum.items() if not k.startswith(F64)}
            p_iso = trace(p_block, x)
            p_cum = trace(p_block, xp) if i else p_iso  # the embeddings: both sides take the same ids
            cumulative = _kept(judge_records(t_cum, p_cum, None, bound), head)
            isolated = _kept(judge_records(t_record, p_iso, None, bound,
                                    functools.partial(judged_as_run, t_block, x, t_record, p_iso, free={})), head)
            report.blocks.append(Block(name, cumulative, isolated))
            out = "out/" + ROOT
            if stopped(t_record) or stopped(p_cum) or F64 + out not in t_cum:
                report.stopped = f"{name} could not run: " + (stopped(t_record) or stopped(p_cum) or stopped(t_cum, F64))
                break
            if not head:
                carried.update(torch=t_record[out], torch64=t_cum[F64 + out], paddle=p_cum[out])
            del t_record, t_cum, p_cum, p_iso, t_block, p_block
            _free_torch(t_model, t_path)
            _free_paddle(p_model, p_path)
            report.blocks[-1].seconds = time.perf_counter() - start
            if progress:
                progress(report.lines()[-1])
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    return report


# ---------------------------------------------------------------- python -m portcheck layers

def add_parser(sub):
    p = sub.add_parser("layers", help="a Llama checkpoint and its Paddle port's, compared block by block",
                       allow_abbrev=False, description=__doc__,
                       formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--torch", required=True, type=Path, metavar="DIR", help="transformers' checkpoint folder "
                   "(config.json, safetensors shards)")
    p.add_argument("--paddle", required=True, type=Path, metavar="DIR", help="paddlenlp's checkpoint folder, saved "
                   "with save_pretrained(..., safe_serialization=True), or paddleformers' (its config.json records "
                   "paddleformers_version: portcheck.checkpoints.formers_folders)")
    p.add_argument("--tokens", default="2x16", metavar="BxL", help="random token ids (seed 0), batch x length "
                   "(default 2x16)")
    p.add_argument("--ids", type=Path, metavar="FILE.npy", help="the token ids instead, an integer array [batch, "
                   "length] (np.save, no pickle)")
    p.add_argument("--device", default="cpu", help="where torch's blocks run (cuda:0; default cpu)")
    p.add_argument("--table", action="store_true", help="print every module's row too (compare_forward's table)")
    p.add_argument("--plot", type=Path, metavar="PNG", help="draw compare_forward's plot there")
    p.add_argument("--html", type=Path, metavar="PAGE", help="also write the comparison as one page here (the first "
                   "diverging block open, every other collapsed; opens offline: docs/view.md)")
    p.add_argument("--tp", type=int, metavar="N", help="the Paddle checkpoint split across N ranks by paddlenlp's "
                   "from_pretrained(..., tensor_parallel_degree=N) (a single-card folder), each rank a process; the "
                   "models whole, not block by block (portcheck.checkpoints.split_folders)")
    p.add_argument("--convert-from-hf", action="store_true", help="the Paddle model is paddleformers' "
                   "from_pretrained(--paddle DIR, convert_from_hf=True) of a transformers folder, judged as loaded "
                   "(portcheck.checkpoints.formers_folders)")
    return p


def tokens_flag(text: str, s: dict) -> np.ndarray:
    """--tokens BxL: random ids (seed 0) below the vocabulary, checked against the memory before they are drawn."""
    batch, sep, length = text.lower().partition("x")
    if not (sep and batch.isdigit() and length.isdigit() and len(batch + length) < 19 and int(batch) > 0
            and int(length) > 0):
        raise PipelineError(f"--tokens {text!r}: give batch x length, e.g. 2x16 [PC907]")
    checkpoint.tokens_fit(s, int(batch), int(length), f"--tokens {text}")
    return np.random.RandomState(0).randint(0, s["vocab_size"], (int(batch), int(length))).astype(np.int64)


def folder_sizes(folder, side: str, rotary: bool = False) -> dict:
    """A checkpoint folder's sizes (checkpoint.sizes), its config checked against its shards; rotary: and the rotary
    cache paddlenlp's skeleton of it would build against the memory free."""
    if side == "torch":
        from transformers import LlamaConfig
    else:
        from paddlenlp.transformers import LlamaConfig
    config, s = _config(LlamaConfig, folder, side)
    if rotary:
        checkpoint.rotary_fits(config, s, Path(folder) / CONFIG)
    return s


def held(sizes: dict) -> dict:
    """The torch side's sizes, its positions those both sides hold."""
    return dict(sizes["torch"], max_position_embeddings=min(s["max_position_embeddings"] for s in sizes.values()))


def main(args) -> int:
    if args.html is not None:  # checked before the hours a comparison may take
        page.writable_page(args.html)
    sizes = {"torch": folder_sizes(args.torch, "torch"), "paddle": folder_sizes(args.paddle, "paddle")}
    if args.ids is not None:
        from portcheck.core.fileio import load_array
        ids = load_array(args.ids, "give an integer array saved with np.save")
    else:
        ids = tokens_flag(args.tokens, held(sizes))
    report = compare(args.torch, args.paddle, ids, device=args.device, progress=print)
    if report.upcast:
        print(report.table().splitlines()[0])
    if args.table:
        print(report.table())
    if args.plot:
        print(report.plot(args.plot))
    if args.html is not None:
        print(report.html(args.html))
    first = report.first_diverging
    print(f"{len(report.blocks)} blocks: " + ("green, cumulative and isolated" if report.passed else
          f"RED: first diverging {first} (block {report.block_of(first)}); on torch's input: {report.first_isolated}"
          + (f"; {report.stopped}" if report.stopped else "") + " [PC921]"))
    return 0 if report.passed else 1
