"""A checkpoint folder judged before anything is built from it (portcheck.checkpoints.stream, `python -m portcheck
layers`): its shards' headers and index read without recursion and with bounded numbers (Shards), its config.json's
sizes checked for type, sign and proportion to the shards (fitted: every size a tensor of the shards witnesses,
so the skeleton built from the config is no larger than the checkpoint, and a model the shards cannot fill is
refused), the rotary cache paddlenlp's skeleton builds and one block's records bounded by the memory free
(rotary_fits, tokens_fit). Each refusal is one line.

May import portcheck.core only.
"""
import os
import resource
import struct
from pathlib import Path

import numpy as np

from portcheck.core.errors import PipelineError
from portcheck.core.fileio import file_kind, open_regular, parse_json

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
PICKLES = ("model_state.pdparams", "model_state.pdparams.index.json", "pytorch_model.bin",
           "pytorch_model.bin.index.json")
SAVE_AS_SAFETENSORS = {"torch": "model.save_pretrained(folder, safe_serialization=True)",
                       "paddle": "model.save_pretrained(folder, safe_serialization=True) (paddlenlp's default "
                                 "writes .pdparams, a pickle)"}
HEADER_MAX = 100 << 20   # a safetensors header larger than this is no checkpoint's
CONFIG_MAX = 1 << 20     # a config.json larger than this is no model's
INV_FREQ = "rotary_emb.inv_freq"
# where each block lives in each side's model (transformers' LlamaForCausalLM, paddlenlp's)
PATHS = {"torch": ("model.embed_tokens", "model.layers", "model.norm", "lm_head"),
         "paddle": ("llama.embed_tokens", "llama.layers", "llama.norm", "lm_head")}
# safetensors dtypes read, as numpy: BF16 is read as its bits and widened by hand (numpy has no bfloat16);
# paddlenlp writes a bfloat16 tensor as U16 (paddle's .numpy() of bfloat16), so a U16 on its side is bf16 too.
# A Llama's weights are floats: an integer tensor is no weight of one
DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}
# config.json's sizes: whole numbers above 0 (a key absent takes the library's default, checked the same)
SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
         "num_key_value_heads", "head_dim", "max_position_embeddings")
REALS = ("rms_norm_eps", "rope_theta", "rope_scaling_factor")  # numbers above 0
# paddlenlp's settings of a model split over processes: the skeleton is one process's whole model
ONE_PROCESS = ("tensor_parallel_degree", "sep_parallel_degree", "context_parallel_degree", "pipeline_parallel_degree")
# one block's records, per value a module outputs or takes: torch's float32 run (4 bytes) and float64 run (8),
# Paddle's cumulative and isolated runs (4 + 4)
RECORD_BYTES = 20


def regular(path: Path, what: str) -> bool:
    """path is a regular file (True) or not there (False); anything else there (a FIFO, a device, a socket) is said
    as what it is, not as missing."""
    if not os.path.lexists(path):
        return False
    if path.is_file():
        return True
    if not path.exists():  # a link to nothing
        return False
    raise PipelineError(f"{path} is {file_kind(path)}, not a regular file: give the {what} save_pretrained wrote "
                        "[PC987]")


# ---------------------------------------------------------------- checkpoint files, read tensor by tensor

def a_folder(folder, side: str) -> Path:
    """The checkpoint folder `--side` names, or one line: a file given (its config.json) names the folder holding it."""
    folder = Path(folder)
    if folder.is_dir():
        return folder
    if folder.is_file():
        raise PipelineError(f"--{side} {folder}: a file, not a folder; give the folder holding it ({folder.parent}) "
                            "[PC490]")
    raise PipelineError(f"--{side} {folder}: not a folder; give the checkpoint folder (config.json and its "
                        "safetensors shards) [PC908]")


class Shards:
    """A checkpoint folder's tensors: {name: (file, dtype, shape, start, end)} from the safetensors headers,
    each tensor read only when asked for (Shards.read), into float32."""

    def __init__(self, folder, side: str):
        self.folder, self.side = a_folder(folder, side), side
        if not regular(self.folder / CONFIG, "config.json"):
            raise PipelineError(f"{self.folder}: no {CONFIG}; give the folder save_pretrained wrote [PC909]")
        self.tensors = {}
        for file in self._files():
            self.tensors.update(self._header(file))
        self.dtypes = sorted({self._dtype(t[1]) for t in self.tensors.values()})

    def _files(self) -> list:
        if regular(self.folder / INDEX, "safetensors index"):
            try:
                with open_regular(self.folder / INDEX) as f:
                    text = f.read(HEADER_MAX + 1)
                if len(text) > HEADER_MAX:
                    raise ValueError(f"more than {HEADER_MAX} bytes")
                weight_map = parse_json(text)["weight_map"]
                files = sorted(set(weight_map.values()))
            except (ValueError, KeyError, TypeError, AttributeError, OSError):
                raise PipelineError(f"{self.folder / INDEX} is not a safetensors index (its weight_map names "
                                    "the shards): save the checkpoint again [PC918]") from None
            if not all(isinstance(n, str) and Path(n).name == n for n in files):
                raise PipelineError(f"{self.folder / INDEX} names shards outside its folder: save the checkpoint again "
                                    "[PC914]")
            return [self.folder / n for n in files]
        if regular(self.folder / SINGLE, "safetensors file"):
            return [self.folder / SINGLE]
        pickled = [n for n in PICKLES if (self.folder / n).exists()]
        how = SAVE_AS_SAFETENSORS[self.side]
        if pickled:
            raise PipelineError(f"{self.folder} holds {pickled[0]}, a pickle, which portcheck never loads (it can "
                                f"run code): save the weights as safetensors, {how} [PC910]")
        raise PipelineError(f"{self.folder} holds no {SINGLE} nor {INDEX}: save the weights as safetensors, {how} "
                            "[PC900]")

    def _header(self, path: Path) -> dict:
        """{name: (path, dtype, shape, start, end)} of one shard, every range checked against its size."""
        try:
            with open_regular(path) as f:
                size = os.fstat(f.fileno()).st_size
                n = struct.unpack("<Q", f.read(8))[0]
                if n > min(HEADER_MAX, size - 8):
                    raise ValueError(f"a header of {n} bytes")
                header = parse_json(f.read(n), depth=4)  # {name: {dtype, shape: [...], data_offsets: [...]}}
            out = {}
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
                if dtype not in DTYPES and not (dtype == "U16" and self.side == "paddle"):
                    raise ValueError(f"{name} is {dtype}, not a float checkpoint's dtype")
                if not all(type(d) is int and d >= 0 for d in [*shape, *offsets]) or len(offsets) != 2:
                    raise ValueError(f"{name}'s shape or offsets are not whole numbers")
                start, end = offsets
                width = 2 if dtype in ("F16", "BF16", "U16") else np.dtype(DTYPES[dtype]).itemsize
                count = 1
                for d in shape:
                    count *= d
                if not 0 <= start <= end <= size - 8 - n:
                    raise ValueError(f"{name}'s bytes lie outside the file")
                if end - start != width * count:
                    what = "a 0-d tensor: 1 value" if not shape else f"{count} values" if count else "empty: 0 values"
                    raise ValueError(f"{name}'s shape {list(shape)} ({what} of {width} bytes) does not match its "
                                     f"data_offsets' {end - start} bytes")
                out[name] = (path, dtype, tuple(shape), 8 + n + start, 8 + n + end)
            return out
        except FileNotFoundError:
            raise PipelineError(f"{path} is missing (its index names it): copy the whole checkpoint folder "
                                "[PC915]") from None
        except (ValueError, KeyError, TypeError, AttributeError, struct.error, OSError) as e:
            raise PipelineError(f"{path} is not a safetensors file ({e}): save the checkpoint again [PC916]") from None

    def _dtype(self, dtype: str) -> str:
        return "bfloat16" if dtype == "U16" else DTYPES[dtype]

    def shape(self, name) -> tuple:
        return self.tensors[name][2]

    def read(self, name) -> np.ndarray:
        """One tensor as float32 (a bf16 or fp16 one widened exactly), read from its shard alone."""
        path, dtype, shape, start, end = self.tensors[name]
        raw = np.empty((end - start) // (2 if dtype in ("BF16", "F16", "U16") else np.dtype(DTYPES[dtype]).itemsize),
                       dtype=np.uint16 if dtype in ("BF16", "U16") else DTYPES[dtype])
        with open_regular(path) as f:
            f.seek(start)
            if f.readinto(memoryview(raw).cast("B")) != end - start:
                raise PipelineError(f"{path} ended inside {name}: copy the checkpoint again [PC917]")
        if dtype in ("BF16", "U16"):  # bfloat16 is float32's upper half; shifted in place: one wide copy, not two
            raw = raw.astype(np.uint32)
            raw <<= 16
            raw = raw.view(np.float32)
        return raw.astype(np.float32, copy=False).reshape(shape)


# ---------------------------------------------------------------- config.json, checked before any skeleton

def read_config(folder, split: tuple = ()) -> dict:
    """config.json's settings, read as JSON of bounded depth and numbers, each size and setting of the right type
    and sign: one line for the first that is not. split: the process counts (ONE_PROCESS) that may be above 1 (a
    checkpoint a tensor-parallel comparison loads split: portcheck.checkpoints.split_folders)."""
    path = Path(folder) / CONFIG
    if not regular(path, "config.json"):
        raise PipelineError(f"{folder}: no {CONFIG}; give the folder save_pretrained wrote [PC909]")
    try:
        with open_regular(path) as f:
            text = f.read(CONFIG_MAX + 1)
        if len(text) > CONFIG_MAX:
            raise ValueError(f"more than {CONFIG_MAX} bytes")
        config = parse_json(text)
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except (ValueError, OSError) as e:
        raise PipelineError(f"{path} cannot be read as a Llama config: {str(e).splitlines()[0][:200]} "
                            "[PC912]") from None
    settled(config, path, split)
    return config


def settled(config, path, split: tuple = ()):
    """Each size a whole number above 0, each real a number above 0, each process count 1 but those of `split`,
    a whole number (config: a dict of config.json or a library's config object's attributes)."""
    get = config.get if isinstance(config, dict) else lambda k, d=None: getattr(config, k, d)
    for key in SIZES:
        value = get(key)
        if value is not None and (type(value) is not int or value <= 0):
            raise PipelineError(f"{path}: {key} is {str(value)[:40]!r}: a Llama's {key} is a whole number above 0 "
                                "[PC981]")
    for key in REALS:
        value = get(key)
        if value is not None and (type(value) not in (int, float) or not 0 < value < float("inf")):
            raise PipelineError(f"{path}: {key} is {str(value)[:40]!r}: give a number above 0 [PC984]")
    for key in ONE_PROCESS:
        value = get(key)
        if value is not None and (type(value) is not int or (value > 1 and key not in split)):
            raise PipelineError(f"{path}: {key} is {str(value)[:40]!r}: portcheck compares one process's whole model; "
                                f"give the checkpoint merged into one, its config without {key} (or 1) [PC983]")


def sizes(config) -> dict:
    """A library's config object's sizes, as its model reads them, checked again (its defaults included) and for
    proportion among themselves: the heads divide the width, the key-value heads the heads, a head's width even."""
    settled(config, "config.json")
    s = {k: getattr(config, k, None) for k in SIZES}
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "max_position_embeddings"):
        if s[key] is None:
            raise PipelineError(f"config.json: {key} is 'None': a Llama's {key} is a whole number above 0 [PC981]")
    s["num_key_value_heads"] = s["num_key_value_heads"] or s["num_attention_heads"]
    s["head_dim"] = s["head_dim"] or s["hidden_size"] // s["num_attention_heads"]
    if s["hidden_size"] % s["num_attention_heads"] or s["num_attention_heads"] % s["num_key_value_heads"] or \
            s["head_dim"] % 2:
        raise PipelineError(f"config.json: hidden_size {s['hidden_size']}, num_attention_heads "
                            f"{s['num_attention_heads']}, num_key_value_heads {s['num_key_value_heads']}: the heads "
                            "divide hidden_size, the key-value heads divide the heads, a head's width is even "
                            "[PC985]")
    return s


def fitted(shards: Shards, s: dict):
    """The config's sizes (sizes) witnessed by the shards' headers, before any skeleton is built from it: the
    embedding's [vocab, hidden], the decoder layers 0 to n - 1 and no other, layer 0's attention output and MLP
    down projection (the heads' width, the MLP's), in each side's layout. One line for the first that differs."""
    side, folder = shards.side, shards.folder
    embed, layers = PATHS[side][0] + ".weight", PATHS[side][1] + "."

    def differs(what, holds):
        raise PipelineError(f"{folder / CONFIG}: {what} does not fit the shards ({holds}): give the config.json "
                            f"saved with these weights [PC982]")
    for name in (embed, f"{layers}0.self_attn.o_proj.weight", f"{layers}0.mlp.down_proj.weight"):
        if name not in shards.tensors:
            raise PipelineError(f"{folder} lacks {name}: the {side} checkpoint does not fit its config's model "
                                "[PC901]")
    if shards.shape(embed) != (s["vocab_size"], s["hidden_size"]):
        differs(f"vocab_size {s['vocab_size']} x hidden_size {s['hidden_size']}",
                f"{embed} is {list(shards.shape(embed))}")
    held = sorted({int(k[len(layers):].split(".")[0]) for k in shards.tensors
                   if k.startswith(layers) and k[len(layers):].split(".")[0].isdigit()})
    # the count first: range(n) made a list of n before comparing, 36 GB for num_hidden_layers 10**9
    if len(held) != s["num_hidden_layers"] or held != list(range(len(held))):
        differs(f"num_hidden_layers {s['num_hidden_layers']}",
                f"layers {held[0]} to {held[-1]}, {len(held)} in all" if held else "no decoder layer")
    heads, hidden, inner = s["num_attention_heads"] * s["head_dim"], s["hidden_size"], s["intermediate_size"]
    transposed = side == "paddle"  # paddlenlp's Linear weights are [in, out]
    for name, shape, what in ((f"{layers}0.self_attn.o_proj.weight", (hidden, heads),
                               f"num_attention_heads {s['num_attention_heads']} x a head's {s['head_dim']}"),
                              (f"{layers}0.mlp.down_proj.weight", (hidden, inner), f"intermediate_size {inner}")):
        want = shape[::-1] if transposed else shape
        if shards.shape(name) != want:
            differs(what, f"{name} is {list(shards.shape(name))}, not {list(want)}")


# ---------------------------------------------------------------- memory, before it is taken

def free_bytes() -> int:
    """The memory this process can still take: the system's available memory, and under an address-space limit
    (ulimit -v) what is left of it."""
    free = None
    try:
        with open("/proc/meminfo") as f:
            free = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    if free is None:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            free = 1 << 62
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm") as f:
                used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            free = min(free, limit - used)
        except (OSError, ValueError, IndexError):
            pass
    return free


def _gb(n: int) -> str:
    return f"{n / 1e9:.3g} GB"


def rotary_fits(config, s: dict, path):
    """paddlenlp's Llama builds a cosine and a sine cache of max_position_embeddings (times a linear or NTK
    scaling factor) x a head's width in each decoder layer, in float32, as the skeleton is built: refused when
    that (and its build's copies) would not fit the memory free."""
    scaled = getattr(config, "rope_scaling_type", None) in ("linear", "ntk")
    positions = s["max_position_embeddings"] * (getattr(config, "rope_scaling_factor", 1) if scaled else 1)
    need = float(s["num_hidden_layers"] * positions * s["head_dim"] * 4 * 2 + positions * s["head_dim"] * 4 * 3)
    free = free_bytes()
    if not need <= free:  # a float: a scaling factor near 1e308 makes it inf, refused too
        factor = f" x rope_scaling_factor {config.rope_scaling_factor:g}" if scaled else ""
        raise PipelineError(f"{path}: max_position_embeddings {s['max_position_embeddings']}{factor}: paddlenlp's "
                            f"skeleton builds a rotary cache of {_gb(need)}, more than the {_gb(free)} free: give a copy of "
                            "the folder whose config.json says fewer positions (at least the tokens' length) "
                            "[PC986]")


def block_bytes(s: dict, batch: int, length: int) -> int:
    """What one block's records take (RECORD_BYTES per value): a decoder layer's modules' outputs and inputs
    (about 36 values of the width and 9 of the MLP's a token, and each head's attention weights over the length),
    or the head's logits. The coefficients keep it at or above the process's growth measured over one block
    (docs/bench/stream.md#a-blocks-records), the block's own weights and the frameworks' work space included."""
    per_token = max(36 * s["hidden_size"] + 9 * s["intermediate_size"] + 2 * s["num_attention_heads"] * length,
                    4 * s["vocab_size"])
    return RECORD_BYTES * batch * length * per_token


def tokens_fit(s: dict, batch: int, length: int, said: str):
    """batch x length tokens within the positions both configs' models hold, and one block's records within the
    memory free; said: how the tokens were given (--tokens 2x16, inputs)."""
    if length > s["max_position_embeddings"]:
        raise PipelineError(f"{said}: {length} tokens a row, more than the {s['max_position_embeddings']} positions "
                            "of the model (config.json's max_position_embeddings): give at most that many [PC988]")
    need, free = block_bytes(s, batch, length), free_bytes()
    if need > free:
        raise PipelineError(f"{said}: one block's records of {batch} x {length} tokens take about {_gb(need)}, more "
                            f"than the {_gb(free)} free: give fewer tokens (2x16 judges every module) [PC989]")
