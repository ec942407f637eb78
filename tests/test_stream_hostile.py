"""`python -m portcheck layers` and stream.compare on bad checkpoint folders (issue 73): each is refused in one line,
exit 2, before anything is built from it. The bad folders are one small valid pair (examples/tiny_llama.py, two
decoder layers, made once for the module) with one thing changed; each runs in a child forked from this process
under a time limit and an address-space limit (RLIMIT_AS), so a hang or a blow-up fails the case rather than the
suite."""
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import traceback

import numpy as np
import pytest

from portcheck import cli
from portcheck.core import spill
from portcheck.core.errors import PipelineError
from portcheck.checkpoints import stream
from examples.tiny_llama import write_pair

SECONDS = 60          # a refusal takes well under a second
MEMORY = 1 << 30      # bytes a case may take above what this process holds
EMBED = {"torch": "model.embed_tokens.weight", "paddle": "llama.embed_tokens.weight"}
NORM = "model.norm.weight"
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    cli.parser()  # what the command imports, imported here once rather than in each child (0.3 s each)
    return write_pair(tmp_path_factory.mktemp("hostile"), num_hidden_layers=2)


def shard_of(folder, name):
    return folder / json.loads((folder / stream.INDEX).read_text())["weight_map"][name]


def rewrite_header(path, edit):
    """The shard's header replaced by edit(header dict) -> its new JSON text; its tensors' bytes kept."""
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    text = edit(json.loads(data[8:8 + n])).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + n:])


def header(name, **changes):
    """An edit of `name`'s entry (a value given as "TEXT:..." is written as that JSON text, which json cannot write)."""
    def edit(h):
        h[name].update({k: f"@@{k}@@" if str(v).startswith("TEXT:") else v for k, v in changes.items()})
        text = json.dumps(h)
        for k, v in changes.items():
            text = text.replace(f'"@@{k}@@"', str(v)[5:])
        return text
    return edit


def config(side, **changes):
    """config.json of one side changed (a "TEXT:..." value written as that JSON text)."""
    def plant(folders):
        path = folders[side] / "config.json"
        c = json.loads(path.read_text())
        c.update({k: f"@@{k}@@" if str(v).startswith("TEXT:") else v for k, v in changes.items()})
        text = json.dumps(c)
        for k, v in changes.items():
            text = text.replace(f'"@@{k}@@"', str(v)[5:])
        path.write_text(text)
    return plant


def shard(side, name, edit):
    return lambda folders: rewrite_header(shard_of(folders[side], EMBED.get(name, name)), edit)


def embed_offsets(size):
    """The embedding's data_offsets made [start, start + size]."""
    def edit(h):
        start = h[EMBED["torch"]]["data_offsets"][0]
        return header(EMBED["torch"], shape="TEXT:[]" if size else "TEXT:[0, 32]",
                      data_offsets=[start, start + size])(h)
    return edit


def fifo(side, name):
    def plant(folders):
        (folders[side] / name).unlink()
        os.mkfifo(folders[side] / name)
    return plant


def nested_index(folders):
    path = folders["torch"] / stream.INDEX
    path.write_text(path.read_text().rstrip()[:-1] + f', "metadata2": {DEEP}}}')


# (case, what is planted, the --tokens given, the words and code of the one line)
CASES = [
    ("nested header", shard("torch", "torch", lambda h: json.dumps(h)[:-1] + f', "x": {DEEP}}}'), "2x8",
     "is not a safetensors file (nested more than 4 levels deep): save the checkpoint again [PC916]"),
    ("nested index", nested_index, "2x8",
     "is not a safetensors index (its weight_map names the shards): save the checkpoint again [PC918]"),
    ("shape 1e400", shard("torch", "torch", header(EMBED["torch"], shape="TEXT:[1e400, 32]")), "2x8",
     "(the number 1e400 is out of a float's range): save the checkpoint again [PC916]"),
    ("embedding []", shard("torch", "torch", embed_offsets(4)), "2x8",
     "vocab_size 64 x hidden_size 32 does not fit the shards (model.embed_tokens.weight is []): give the "
     "config.json saved with these weights [PC982]"),
    ("embedding [0, 32]", shard("torch", "torch", embed_offsets(0)), "2x8",
     "(model.embed_tokens.weight is [0, 32]): give the config.json saved with these weights [PC982]"),
    ("embedding [] in its own range", shard("torch", "torch", header(EMBED["torch"], shape="TEXT:[]")), "2x8",
     "(model.embed_tokens.weight's shape [] (a 0-d tensor: 1 value of 4 bytes) does not match its data_offsets' "
     "8192 bytes): save the checkpoint again [PC916]"),
    ("embedding [0, 32] in its own range", shard("torch", "torch", header(EMBED["torch"], shape="TEXT:[0, 32]")),
     "2x8", "(model.embed_tokens.weight's shape [0, 32] (empty: 0 values of 4 bytes) does not match its "
     "data_offsets' 8192 bytes): save the checkpoint again [PC916]"),
    ("an integer weight", shard("torch", NORM, header(NORM, dtype="I32")), "2x8",
     "(model.norm.weight is I32, not a float checkpoint's dtype): save the checkpoint again [PC916]"),
    ("vocab_size -5", config("torch", vocab_size=-5), "2x8",
     "vocab_size is '-5': a Llama's vocab_size is a whole number above 0 [PC981]"),
    ("num_attention_heads 0", config("paddle", num_attention_heads=0), "2x8",
     "num_attention_heads is '0': a Llama's num_attention_heads is a whole number above 0 [PC981]"),
    ("hidden_size '32'", config("torch", hidden_size="32"), "2x8",
     "hidden_size is '32': a Llama's hidden_size is a whole number above 0 [PC981]"),
    ("num_key_value_heads 3", config("torch", num_key_value_heads=3), "2x8",
     "the key-value heads divide the heads, a head's width is even [PC985]"),
    ("tensor_parallel_degree 2", config("paddle", tensor_parallel_degree=2), "2x8",
     "tensor_parallel_degree is '2': portcheck compares one process's whole model; give the checkpoint merged into "
     "one, its config without tensor_parallel_degree (or 1) [PC983]"),
    ("a 400-digit rope_theta", config("torch", rope_theta="TEXT:" + "9" * 400), "2x8",
     "cannot be read as a Llama config: a number of 400 digits [PC912]"),
    ("rms_norm_eps '1e-5'", config("paddle", rms_norm_eps="1e-5"), "2x8",
     "rms_norm_eps is '1e-5': give a number above 0 [PC984]"),
    ("num_hidden_layers 20000", config("torch", num_hidden_layers=20000), "2x8",
     "num_hidden_layers 20000 does not fit the shards (layers 0 to 1, 2 in all): give the config.json saved with "
     "these weights [PC982]"),
    ("num_hidden_layers 10**9", config("paddle", num_hidden_layers=10 ** 9), "2x8",
     "num_hidden_layers 1000000000 does not fit the shards (layers 0 to 1, 2 in all)"),
    ("num_hidden_layers 1e9", config("paddle", num_hidden_layers=1e9), "2x8",
     "num_hidden_layers is '1000000000.0': a Llama's num_hidden_layers is a whole number above 0 [PC981]"),
    ("hidden_size 2**30", config("paddle", hidden_size=2 ** 30), "2x8",
     "vocab_size 64 x hidden_size 1073741824 does not fit the shards (llama.embed_tokens.weight is [64, 32])"),
    ("max_position_embeddings 10**9", config("paddle", max_position_embeddings=10 ** 9), "2x8",
     "max_position_embeddings 1000000000: paddlenlp's skeleton builds a rotary cache of 224 GB, more than the"),
    ("rope_scaling_factor 1e300", config("paddle", rope_scaling_type="linear", rope_scaling_factor=1e300), "2x8",
     "max_position_embeddings 64 x rope_scaling_factor 1e+300: paddlenlp's skeleton builds a rotary cache of"),
    ("max_position_embeddings 1e9", config("torch", max_position_embeddings=1e9), "2x8",
     "max_position_embeddings is '1000000000.0': a Llama's max_position_embeddings is a whole number above 0 [PC981]"),
    ("--tokens 1x100000", None, "1x100000",
     "--tokens 1x100000: 100000 tokens a row, more than the 64 positions of the model (config.json's "
     "max_position_embeddings): give at most that many [PC988]"),
    ("--tokens 100000x64", None, "100000x64", "--tokens 100000x64: one block's records of 100000 x 64 tokens take "
                                             "about 314 GB, more than the"),
    ("--tokens 1x" + "9" * 30, None, "1x" + "9" * 30, "give batch x length, e.g. 2x16 [PC907]"),
    ("a FIFO index.json", fifo("torch", stream.INDEX), "2x8",
     "model.safetensors.index.json is a FIFO, not a regular file: give the safetensors index save_pretrained wrote "
     "[PC987]"),
    ("a FIFO config.json", fifo("paddle", "config.json"), "2x8",
     "config.json is a FIFO, not a regular file: give the config.json save_pretrained wrote [PC987]"),
]


def forked(run, err_path) -> int:
    """run() in a child of this process under SECONDS and MEMORY more than this process holds: its exit code
    (SystemExit's; 99 for a traceback, written to err_path with its stderr; -signal for a kill: the time limit)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 99
        try:
            fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 2)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            sys.stderr = os.fdopen(2, "w")  # pytest's capture stands in for it in this process
            with open("/proc/self/statm") as f:
                held = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            resource.setrlimit(resource.RLIMIT_AS, (held + MEMORY, resource.getrlimit(resource.RLIMIT_AS)[1]))
            signal.alarm(SECONDS)
            run()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: BLE001 - the traceback is the failure this test looks for
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.parametrize("case, plant, tokens, said", CASES, ids=[c[0] for c in CASES])
def test_a_bad_checkpoint_folder_is_one_line_and_exit_2_before_anything_is_built(pair, tmp_path, case, plant, tokens,
                                                                                 said):
    folders = {side: shutil.copytree(folder, tmp_path / side) for side, folder in zip(("torch", "paddle"), pair)}
    if plant:
        plant(folders)
    err = tmp_path / "stderr"
    code = forked(lambda: cli.main(["layers", "--torch", str(folders["torch"]), "--paddle", str(folders["paddle"]),
                                    "--tokens", tokens]), err)
    lines = err.read_text().strip().splitlines()
    assert code == 2 and len(lines) == 1 and said in lines[0], (code, err.read_text()[-3000:])


def test_the_valid_folders_pass_every_check_before_the_build(pair):
    sizes = {side: stream.folder_sizes(folder, side) for side, folder in zip(("torch", "paddle"), pair)}
    assert sizes["torch"] == {**sizes["paddle"], "head_dim": 8} and sizes["torch"]["num_hidden_layers"] == 2
    assert stream.tokens_flag("2x8", stream.held(sizes)).shape == (2, 8)


def test_record_dir_of_another_program_is_refused_and_left_as_it_is(pair, tmp_path):
    """docs/large_models.md: a new, empty or its own folder only; another program's was written into (stream's
    carried/, compare_forward's torch/ and paddle/)."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    ids = np.zeros((1, 4), "int64")
    with pytest.raises(PipelineError, match=r"holds files portcheck did not write .* another record_dir \[PC219]"):
        stream.compare(*pair, ids, record_dir=theirs)
    assert sorted(p.name for p in theirs.iterdir()) == ["notes.txt"]
    import paddle
    import torch
    from portcheck import compare_forward
    with pytest.raises(PipelineError, match=r"holds files portcheck did not write .* another record_dir \[PC219]"):
        compare_forward(torch.nn.Linear(2, 2), paddle.nn.Linear(2, 2), np.ones((1, 2), "float32"), record_dir=theirs)
    assert sorted(p.name for p in theirs.iterdir()) == ["notes.txt"]  # was given torch/ and paddle/
    (theirs / spill.OWNED).symlink_to(theirs / "notes.txt")  # a mark that is a link marks nothing (fileio.claim_folder)
    with pytest.raises(PipelineError, match=r"holds files portcheck did not write .* another record_dir \[PC219]"):
        spill.Spill(theirs)["0"] = ids
    assert sorted(p.name for p in theirs.iterdir()) == sorted(["notes.txt", spill.OWNED])
    own = tmp_path / "own"
    spill.Spill(own)["0"] = ids  # a folder it wrote before: marked, written in again
    assert stream.compare(*pair, ids, record_dir=own).passed and (own / spill.OWNED).is_file()


def test_a_refusal_of_the_command_itself_is_its_one_line_on_stderr(pair, tmp_path):
    """`python -m portcheck layers` loads the frameworks in its own process (the cases above fork this one, which
    holds them already): paddle's ccache and setuptools' distutils warnings and datasets' "PyTorch version ...
    available." came before the refusal's line. Now silenced around those imports alone; run's children untouched."""
    folders = {side: shutil.copytree(folder, tmp_path / side) for side, folder in zip(("torch", "paddle"), pair)}
    config("paddle", tensor_parallel_degree=2)(folders)
    done = subprocess.run([sys.executable, "-m", "portcheck", "layers", "--torch", str(folders["torch"]), "--paddle",
                           str(folders["paddle"]), "--tokens", "2x8"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "[PC983]" in done.stderr, done.stderr


def test_a_blocks_records_estimate_holds_the_growth_measured():
    """checkpoint.block_bytes, against which the tokens are refused before any block runs (PC989), is at or above
    each growth docs/bench/stream.md records: an estimate below it admits tokens the memory cannot hold."""
    from conftest import ROOT
    from portcheck.checkpoints import checkpoint
    for pair in json.loads((ROOT / "docs/bench/stream.json").read_text())["records"]["pairs"]:
        width, (batch, length) = pair["hidden"], map(int, pair["tokens"].split("x"))
        size = dict(vocab_size=256, hidden_size=width, intermediate_size=3 * width, num_attention_heads=4)
        assert checkpoint.block_bytes(size, batch, length) / 2 ** 20 >= pair["grew_mb"], pair
