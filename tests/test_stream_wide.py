"""portcheck.stream at a 7B's width (issue 65): a Llama pair of hidden 4096, intermediate 11008 and 32 heads, two
decoder layers, written by tools/bench_stream.py as transformers' bf16 safetensors shards and as paddlenlp's
checkpoint, is compared in a block's memory (the process's peak resident memory) with a gate/up swap planted in
layer 1, named at that layer and module, cumulative and isolated, every other block's own computation green. The
vocabulary is 256, not a 7B's 32000: the width is what this file is about (the sums of 4096 and 11008 values, a
block of 0.8 GB); 32000 would add 0.5 GB of embeddings and head and nothing of that. The pair is written once (~1.6
GB of shards); the plant is made at load, on the Paddle skeleton (bench_stream.swapped)."""
import ctypes
import shutil
import types

import numpy as np
import pytest

from portcheck.checkpoints import stream
from test_stream import named_at
from tools import bench_stream

WIDE = dict(hidden=4096, intermediate=11008, heads=32, layers=2, vocab=256)
IDS = np.random.RandomState(0).randint(0, WIDE["vocab"], (1, 8)).astype("int64")


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """The two checkpoint folders; both layers of one random draw (bench_stream's DRAWS: a second draw is 3 s more,
    and the distinct layers' pair is tests/test_stream.py's)."""
    folder = tmp_path_factory.mktemp("wide") / "pair"
    bench_stream.write_pair(bench_stream.config(types.SimpleNamespace(**WIDE)), folder, draws=1)
    yield folder / "torch", folder / "paddle"
    shutil.rmtree(folder)  # 1.6 GB freed when this file ends, not the session


def float32_bytes(folder, prefix="") -> int:
    """What the checkpoint's tensors whose names start with prefix take in float32."""
    return sum(4 * int(np.prod(t[2])) for name, t in stream.Shards(folder, "torch").tensors.items()
               if name.startswith(prefix))


def status(key: str) -> int:
    """A /proc/self/status figure (VmRSS, VmHWM) in bytes."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))


def peak_growth(run):
    """(run's result, how far this process's resident memory rose above where it stood before run, at its peak):
    freed memory the allocator kept handed back first (malloc_trim), the kernel's high-water mark reset to now
    (/proc/self/clear_refs 5)."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS")
    return run(), status("VmHWM") - before


def test_a_gate_up_swap_in_layer_1_of_a_7b_width_pair_is_named_there_in_a_blocks_memory(wide):
    """One run (the file's cost is the pair's 9 s of writing and 9 s a comparison): the plant named in layer 1, every
    other block's own computation green (isolated), the blocks before it green as run; the clean pair's whole green is
    tests/test_stream.py's, at a small width."""
    model = stream.paddle_skeleton(wide[1])
    bench_stream.swapped(model.llama.layers[1])
    report, grew = peak_growth(lambda: stream.compare(*wide, IDS, paddle_model=model))
    assert [b.name for b in report.blocks] == ["model.embed_tokens", "model.layers.0", "model.layers.1",
                                               "model.norm", "lm_head"]
    assert named_at(report, 1), report.table()
    assert report.first_diverging == report.first_isolated == "model.layers.1.mlp"
    assert all(b.cumulative.passed for b in report.blocks[:2]), report.table()
    assert report.upcast == {"torch": "bfloat16", "paddle": "bfloat16"}
    # one block of each side in float32, and at most a block and a half more for the rest (the tensor being read and
    # its float32 copies, torch's float64 rows, the activations, what the allocator keeps: 1.1 - 1.3 blocks measured);
    # a side held whole is two blocks, so with the other side's block and what is read beside them, over 4 (4.08
    # measured with torch's blocks never freed), and both whole models are 4 blocks and the embeddings and head
    block = float32_bytes(wide[0], "model.layers.0.")
    whole = 2 * float32_bytes(wide[0])
    assert grew < 3.5 * block < whole, (grew / 1e9, block / 1e9, whole / 1e9)
