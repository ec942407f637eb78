"""A Paddle model in tensor parallel, two ranks under paddle.distributed.spawn (gloo, on CPU), judged module by module
against the torch model in this process (portcheck.parallel.split): docs/large_models.md's program, its clean split
green, with each bug of tests/split_pairs.py planted beside it in the same launch of the ranks, red at its module and
rank; the shards and the bad input."""
import functools
import multiprocessing
import re
import time

import numpy as np
import pytest

from portcheck.checkpoints import split_folders
from portcheck.core.errors import PipelineError
from portcheck.gradients import split_steps
from portcheck.mapping import shards
from portcheck.parallel import split, standins

import split_pairs as pairs
from examples import tiny_gpt_split as gpt
from examples import tiny_llama_split as pair
from examples.tiny_llama import write_pair
from test_docs_blocks import DOCS, printed_as_said, python_blocks, run_in_process


STEPS = 2  # optimizer steps each rank takes on its shard


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """docs/large_models.md's split program, run alone in an empty folder with fresh globals, in this process (which
    imports transformers and paddlenlp already); the one compare_split it calls judges every plant beside the clean
    split in the same launch of the ranks (compare_splits' variants), the model and the plants its training shows
    trained STEPS steps there too
    (compare_split_steps); in the same launch too (split.Another), examples/tiny_gpt_split.py's GPT with a fused
    q/k/v, clean ("gpt", trained too) and planted ("gpt_qkv_blocks" in its forward, "gpt_k_doubled" in its gradients,
    trained), and two single-card checkpoint folders of a tiny Llama
    (examples/tiny_llama.py's write_pair) split by paddlenlp's from_pretrained on each rank ("pretrained",
    "pretrained_64": its vocabulary 64, its build holding paddlenlp's class, which each rank imports as it starts):
    {None: the page's report, plant: its report,
    "backward": {None or plant: its compare_split_backward report}, "page": (exit status, output, what the page
    says it prints)}."""
    kept, original = {}, split.compare_split

    def with_plants(torch_model, build, inputs, degree=2, state=None, isolate=False, timeout=split.TIMEOUT):
        from paddlenlp.transformers import LlamaForCausalLM
        gpt_model, gpt_state = gpt.torch_and_state()
        others = {name: split.Another(gpt_model, gpt.build, gpt_state, gpt.layouts(), change)
                  for name, change in (("gpt", None), ("gpt_qkv_blocks", pairs.qkv_blocks),
                                       ("gpt_k_doubled", pairs.k_grad_doubled_on_rank_1))}
        kept["inputs"], kept["folders"] = inputs, {}
        for name, vocab in (("pretrained", 96), ("pretrained_64", 64)):  # paddlenlp's own split of each folder
            folders = write_pair(tmp_path_factory.mktemp(name), shard="10GB", num_hidden_layers=2, vocab_size=vocab)
            kept["folders"][name] = folders
            others[name] = split.Another(split_folders.torch_from_folder(folders[0]), pairs.pretrained(folders[1])
                                         if vocab == 96 else functools.partial(pairs.pretrained_class,
                                                                               LlamaForCausalLM, folders[1]))
        forward, kept["backward"] = split_steps.compare_split_steps(
            torch_model, build, inputs, pairs.TARGETS, (pairs.torch_loss, pairs.paddle_loss),
            (pairs.torch_sgd, pairs.paddle_sgd), degree, state, STEPS,
            {**pairs.PLANTS, **pairs.BACKWARD_PLANTS, **others}, isolate, timeout=timeout,
            trained=[None, "input_not_parallel", "allreduce_missing", *pairs.BACKWARD_PLANTS, "gpt",
                     "gpt_k_doubled"])
        kept.update(forward)
        return kept[None]
    split.compare_split = with_plants
    try:
        code, said = python_blocks(DOCS / "large_models.md")[2]  # the first two: tests/test_stream.py's
        kept["page"] = (*run_in_process([code], tmp_path_factory.mktemp("split"))[0], said)
    finally:
        split.compare_split = original
    return kept


@pytest.fixture(scope="module")
def torch_model():
    return pair.torch_llama()


def test_the_pages_program_runs_and_prints_what_the_page_says(reports):
    status, output, said = reports["page"]
    assert status == 0 and not printed_as_said(output, said), output[-3000:]


def test_the_clean_split_is_green_against_torchs_own_error(reports):
    report = reports[None]
    assert report.passed and report.ranks == {} and report.first_diverging is None, report.table()
    assert report.differing == [] and len(report.isolated) > 30, report.table()  # each module on torch's values too
    names = [r.name for r in report.paired]
    # each kind of split layer paired with torch's module and judged: columns joined, rows reduced, vocabulary rows
    for name in ("model.embed_tokens", "model.layers.0.self_attn.k_proj", "model.layers.0.mlp.down_proj",
                 "model.layers.1.self_attn.o_proj", "lm_head", "(model):logits"):
        assert name in names, names
    table = report.table()
    assert "the Paddle model ran split across 2 ranks; on CPU: Paddle's c_identity, mp_allreduce, c_concat, " \
           "c_split and c_softmax_with_cross_entropy (no CPU kernel) stood in for by paddle.distributed.all_reduce" \
        in table, table


def test_a_gpt_with_a_fused_qkv_split_is_green_each_part_judged_on_its_heads(reports):
    """GPT-2's c_attn [q | k | v] against paddlenlp's qkv_proj split across the ranks, its columns per head: each
    rank's output cut into its heads' q, k and v, the parts joined across the ranks and judged each on its own."""
    report = reports["gpt"]
    assert report.passed and report.ranks == {} and report.differing == [], report.table()
    parts = {f"h.{i}.attn.c_attn.{p}" for i in range(2) for p in "qkv"}
    assert parts <= {r.name for r in report.paired} and parts <= {r.name for r in report.isolated}, report.table()
    assert report.counterparts["out/h.0.attn.c_attn.k"] == "out/decoder.layers.0.self_attn.qkv_proj.k"


def test_a_fused_qkv_shard_in_the_wrong_order_is_red_at_its_parts_on_its_rank(reports):
    """rank 1's qkv_proj shard laid out [q | k | v] where the layer reads it per head: red at the first part, on
    rank 1 alone; isolated, the three parts of that layer and no other module."""
    report = reports["gpt_qkv_blocks"]
    assert not report.passed and report.first_diverging == "h.0.attn.c_attn.q" and report.parted() == [1], \
        report.table()
    assert "parts from torch on rank 1 of 2" in report.table()
    assert report.differing == ["h.0.attn.c_attn.q", "h.0.attn.c_attn.k", "h.0.attn.c_attn.v"], report.table()


@pytest.mark.parametrize("plant, where, ranks, isolated", [
    ("kv_order", "model.layers.0.self_attn.k_proj", [0, 1], ["self_attn.k_proj", "self_attn.v_proj"]),
    ("gate_up_one_shard", "model.layers.0.mlp.gate_proj", [1], ["mlp.gate_proj", "mlp.up_proj"]),
    ("bias_every_rank", "model.layers.0.mlp.down_proj", [0, 1], ["mlp.down_proj"]),
    ("vocab_offset", "model.embed_tokens", [0, 1], ["embed_tokens"]),
])
def test_a_plant_in_the_split_is_red_at_its_module_and_rank(reports, plant, where, ranks, isolated):
    """Cumulative: the first module whose output parts, and the ranks whose own part of it differs; isolated (each
    rank's module on its part of torch's input): every module whose own computation differs, and no other."""
    report = reports[plant]
    assert not report.passed and report.first_diverging == where and report.parted() == ranks, report.table()
    assert f"parts from torch on rank {', '.join(map(str, ranks))} of 2" in report.table()
    layer = "model." if plant == "vocab_offset" else "model.layers.0."
    assert report.differing == [layer + name for name in isolated], report.table()


def test_an_allreduce_missing_is_red_at_the_plain_linear_holding_the_ranks_rows(reports):
    """A plain Linear holds the rank's rows of down_proj: its input is the rank's columns, which no layer says, yet
    every rank's is as wide and joined they are torch's input, so it is paired with torch's whole down_proj, its
    input joined and within, its output each rank's partial sum: red at the Linear itself, on both ranks, cumulative
    and isolated (each rank's Linear fed its columns of torch's input), and no other module's own computation."""
    report = reports["allreduce_missing"]
    assert not report.passed and report.first_diverging == "model.layers.1.mlp.down_proj", report.table()
    assert report.parted() == [0, 1] and next(iter(report.ranks)) == "model.layers.1.mlp.down_proj", report.ranks
    row = next(r for r in report.paired if r.name == "model.layers.1.mlp.down_proj")
    assert row.input_ok is True, report.table()
    assert report.differing == ["model.layers.1.mlp.down_proj"], report.table()
    trained = reports["backward"]["allreduce_missing"].forward  # the steps' first forward joins it alike
    assert trained.first_diverging == "model.layers.1.mlp.down_proj", trained.table()


def test_a_row_parallel_layer_told_its_input_is_whole_stops_named_at_its_module_and_ranks(reports):
    report = reports["input_not_parallel"]
    assert not report.passed and report.stop_ranks == [0, 1], report.table()
    assert report.first_diverging == "model.layers.1.self_attn.o_proj" and \
        report.first_diverging.paddle == "llama.layers.1.self_attn.o_proj", report.table()
    assert "the Paddle model stopped on rank 0, 1: in llama.layers.1.self_attn.o_proj: ValueError" in report.table()
    trained = reports["backward"]["input_not_parallel"]  # its training stops too: red, one line, nothing judged
    assert not trained.passed and trained.grads == [], trained.table()
    assert re.match(r"^the Paddle model's training stopped on rank 0, 1 of 2: the paddle model's forward raised: "
                    r"ValueError.*; nothing was judged \[PC923\]$", trained.table()), trained.table()


def test_the_clean_split_trained_is_green_its_gradients_and_weights_gathered(reports):
    report = reports["backward"][None]
    assert report.passed and report.ranks == {} and report.first_diverging is None, report.table()
    grads = {r.name for r in report.grads}  # every parameter's gradient: split ones joined, replicated ones whole
    for name in ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "lm_head.weight",
                 "model.layers.1.mlp.down_proj.weight", "model.layers.1.mlp.down_proj.bias", "model.norm.weight"):
        assert f"grad {name}" in grads, grads
    assert len(report.steps) == STEPS and all(len(rows) > 20 for rows in report.steps), report.table()
    assert "the Paddle model trained split across 2 ranks, each stepping its shard; on CPU:" in report.table()


@pytest.mark.parametrize("plant, where, ranks", [
    ("identity_not_summing", "grad model.layers.1.post_attention_layernorm.weight", [0, 1]),
    ("grad_scaled_on_rank_1", "grad model.layers.1.mlp.down_proj.weight", [1]),
])
def test_a_gradient_wrong_on_the_ranks_is_red_at_its_parameter_and_rank_the_forward_green(reports, plant, where,
                                                                                          ranks):
    """A backward's bug the forward cannot see (its output green, module by module): red at the parameter where the
    backward parts, with the ranks whose own gradient differs; every step after it red too."""
    assert reports[plant].passed, reports[plant].table()
    report = reports["backward"][plant]
    assert not report.passed and report.first_diverging == where and report.parted() == ranks, report.table()
    assert report.ranks[where] == ranks and f"{where} parts from torch on rank {', '.join(map(str, ranks))} of 2" \
        in report.table()
    weight = where.removeprefix("grad ")
    assert not next(r for r in report.steps[0] if r.name == weight).passed, report.table()


def test_a_shard_is_cut_on_the_axis_its_layer_declares_and_checked_against_the_rank_model():
    import paddle
    model = paddle.nn.Linear(4, 6)
    model.weight.is_distributed, model.weight.split_axis = True, 1
    model.bias.is_distributed, model.bias.split_axis = True, 0
    full = {"weight": np.arange(48, dtype="float32").reshape(4, 12), "bias": np.arange(12, dtype="float32")}
    part = shards.checked_shard(full, model, 1, 2)
    assert np.array_equal(part["weight"], full["weight"][:, 6:]) and np.array_equal(part["bias"], full["bias"][6:])
    with pytest.raises(PipelineError, match=r"rank 0 of 3: the shard does not fit its model \(2 differ\): weight: "
                                            r"the shard's \[4, 4\], the rank's model \[4, 6\]; bias: .*\[PC323\]$"):
        shards.checked_shard(full, model, 0, 3)  # a checkpoint split for another degree
    with pytest.raises(PipelineError, match=r"weight \[4, 12\]: axis 1 \(12\) does not split in 5 .*\[PC322\]$"):
        shards.shard(full, model, 0, 5)
    assert shards.differences({"weight": full["weight"]}, model) == [
        "bias: in the rank's model, not in the shard", "weight: the shard's [4, 12], the rank's model [4, 6]"]


def test_a_degree_that_does_not_divide_the_heads_or_vocabulary_is_one_line_before_any_rank_starts(torch_model):
    with pytest.raises(PipelineError, match=r"degree 3 does not divide the model's num_attention_heads \(4\).*"
                                            r"\[PC422\]$"):
        split.compare_split(torch_model, pair.build, pair.IDS, 3)
    assert multiprocessing.active_children() == []


def test_a_fused_modules_heads_the_degree_does_not_divide_are_one_line_before_any_rank_starts():
    from portcheck import Fused
    with pytest.raises(PipelineError, match=r"^layouts\['qkv_proj'\]: its 6 heads do not split in 4 equal parts .*"
                                            r"\[PC926\]$"):
        split.compare_split(None, gpt.build, gpt.IDS, 4, layouts={"qkv_proj": Fused(("q", "k", "v"), heads=6)})
    assert multiprocessing.active_children() == []


def test_a_build_the_ranks_cannot_import_is_one_line_before_any_rank_starts(torch_model):
    with pytest.raises(PipelineError, match=r"^build \('.*<lambda>'\) cannot reach the ranks: .* \[PC922\]$"):
        split.compare_split(torch_model, lambda rank, degree: None, pair.IDS, 2)
    assert multiprocessing.active_children() == []


def test_a_paddle_loss_the_ranks_cannot_import_is_one_line_before_any_rank_starts(torch_model):
    with pytest.raises(PipelineError, match=r"^the Paddle loss \('.*<lambda>'\) cannot reach the ranks: .* \[PC922\]$"):
        split_steps.compare_split_backward(torch_model, pair.build, pair.IDS, pairs.TARGETS,
                                           (pairs.torch_loss, lambda out, y: out), (pairs.torch_sgd, pairs.paddle_sgd))
    assert multiprocessing.active_children() == []


def test_a_checkpoint_paddlenlp_splits_as_it_loads_is_green_against_torch(reports):
    """from_pretrained(folder, tensor_parallel_degree=2, tensor_parallel_rank=r) of a tiny Llama saved whole by
    save_pretrained: each rank's shard is paddlenlp's own split, every module green."""
    report = reports["pretrained"]
    assert report.passed and report.ranks == {} and report.differing == [], report.table()
    assert {"lm_head", "model.embed_tokens", "model.layers.1.mlp.down_proj"} <= {r.name for r in report.paired}


def test_paddlenlps_own_split_of_a_head_as_wide_as_its_rows_is_red_at_the_head(reports):
    """paddlenlp 2.8.1's safetensors reader cuts columns [0, n) of a tensor with n rows as if whole: a [32, 64] head
    split in two gives rank 0 the first 32 x 32 values in memory order, not its columns (a real bug of the loader,
    not planted): red at lm_head, every module before it green."""
    report = reports["pretrained_64"]
    assert not report.passed and report.first_diverging == "lm_head", report.table()
    assert report.differing == ["lm_head"], report.table()


def test_layers_tp_prints_each_block_split_across_the_ranks(reports, tmp_path, monkeypatch, capsys):
    """`layers --tp 2` on the folders: its compare_split call is the fixture's, already run in the shared launch
    on the same folder, degree and ids (asserted), so each block's line is printed from the report it gives."""
    from portcheck import cli
    torch_dir, paddle_dir = reports["folders"]["pretrained"]
    np.save(tmp_path / "ids.npy", reports["inputs"]["input_ids"])

    def launched(torch_model, build, inputs, degree, isolate=False):
        assert build.folder == str(paddle_dir.resolve()) and degree == 2 and isolate, (build, degree, isolate)
        assert np.array_equal(inputs["input_ids"], reports["inputs"]["input_ids"])
        return reports["pretrained"]
    monkeypatch.setattr(split, "compare_split", launched)
    with pytest.raises(SystemExit) as ended:
        cli.main(["layers", "--torch", str(torch_dir), "--paddle", str(paddle_dir), "--tp", "2", "--ids",
                  str(tmp_path / "ids.npy")])
    out = capsys.readouterr().out.strip().splitlines()
    assert ended.value.code == 0, out
    assert out[:2] == ["model.embed_tokens: cumulative green, isolated green",
                       "model.layers.0: cumulative green, isolated green"], out
    assert "lm_head: cumulative green, isolated green" in out and "the Paddle model ran split across 2 ranks" in \
        out[-2] and out[-1] == "5 blocks split across 2 ranks: green, cumulative and isolated", out


def test_a_checkpoint_split_for_another_degree_and_a_bad_tp_flag_are_one_line_before_any_rank(tmp_path, capsys,
                                                                                               reports):
    import json
    import shutil
    from portcheck import cli
    torch_dir, paddle_dir = reports["folders"]["pretrained"]
    four = tmp_path / "paddle_tp4"  # as paddlenlp saves a model split across 4 ranks: one file per rank
    four.mkdir()
    config = (paddle_dir / "config.json").read_text()
    (four / "config.json").write_text(json.dumps({**json.loads(config), "tensor_parallel_degree": 4}))
    for r in range(4):
        shutil.copy(paddle_dir / "model.safetensors", four / f"model.tp0{r}.safetensors")
    build = pairs.pretrained(four)
    with pytest.raises(PipelineError, match=r"paddle_tp4: a checkpoint split for 4 ranks \(its config.json's "
                                            r"tensor_parallel_degree 4\), not 2: .* \[PC927\]$"):
        split.compare_split(None, build, pair.IDS, 2)
    (four / "config.json").write_text(config)  # the files' names say it too
    with pytest.raises(PipelineError, match=r"split for 4 ranks \(its files model.tp00.safetensors, "
                                            r"model.tp01.safetensors and 2 more\), not 2: .*\[PC927\]$"):
        split.compare_split(None, build, pair.IDS, 2)
    assert multiprocessing.active_children() == []
    for flags, said in ((["--tp", "2"], r"split for 4 ranks .*\[PC927\]"),
                        (["--tp", "1"], r"^error: --tp 1: .*\[PC928\]"),
                        (["--tp", "2", "--device", "cuda:0"], r"^error: --device cuda:0: .*\[PC930\]")):
        with pytest.raises(SystemExit) as ended:
            cli.main(["layers", "--torch", str(torch_dir), "--paddle", str(four)] + flags)
        err = capsys.readouterr().err.strip()
        assert ended.value.code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
        assert re.search(said + "$", err), err


def test_a_split_paddle_model_against_torch_launched_too_is_one_line_saying_what_runs():
    """Both commands launched: torch's ranks hold whole models, Paddle's shards; run judges a split Paddle script
    against torch's one process (tests/test_run_split.py)."""
    import paddle
    from portcheck.scripts.hooks_paddle import PaddleSide

    class Launched:  # the recorder's Run of a Paddle rank whose torch side is launched too
        torch_whole, layouts, config = False, {}, {}

        def refuse(self, why):
            return PipelineError(why)
    model = paddle.nn.Linear(4, 6)
    model.weight.is_distributed = True  # one rank's shard, as fleet's layers mark theirs
    side = PaddleSide()
    side.run = Launched()
    with pytest.raises(PipelineError, match=r"^its model is split in tensor parallel \(weight is one rank's shard\) "
                                            r"and the torch script runs as ranks too: .*without a launcher \[PC925\]$"):
        side.start_from_torch(model, {}, None)


def test_a_paddle_whose_private_names_moved_is_refused_with_nothing_replaced(monkeypatch):
    from paddle.distributed.fleet.layers.mpu import mp_ops
    original = mp_ops._mp_allreduce
    monkeypatch.delattr(mp_ops, "_c_concat")
    with pytest.raises(PipelineError, match=r"mp_ops\._c_concat is missing, not what the CPU stand-ins replace.*"
                                            r"nothing was replaced; run on GPUs \[PC428\]$"):
        standins.install()
    assert mp_ops._mp_allreduce is original
    monkeypatch.setattr("paddle.__version__", "9.9.9")
    with pytest.raises(PipelineError, match=r"^Paddle 9\.9\.9: the CPU stand-ins .* \[PC425\]$"):
        standins.install()
    with pytest.raises(PipelineError, match=r"^Paddle 9\.9\.9: .*\[PC425\]$"):  # said before any rank starts
        split.compare_split(pair.torch_llama(), pair.build, pair.IDS, 2)
    assert multiprocessing.active_children() == []


def test_flex_checkpoints_resharding_moved_is_refused_and_stood_in_only_while_it_runs(monkeypatch):
    """paddleformers' from_pretrained across ranks reshards through flex checkpoint's broadcast, which moves each
    tensor onto a GPU: on a CPU its Tensor.cuda is a CPU copy while it runs, and Paddle's own again after."""
    import paddle
    from paddle.distributed.flex_checkpoint.dcp import reshard_comm
    own = reshard_comm.BroadcastCommunicator.communicate
    monkeypatch.setattr(reshard_comm.BroadcastCommunicator, "communicate", lambda self, items, context: None)
    with pytest.raises(PipelineError, match=r"reshard_comm\.BroadcastCommunicator\.communicate is spelled "
                                            r"\('self', 'items', 'context'\), .*nothing was replaced; run on GPUs "
                                            r"\[PC428\]$"):
        standins.install()
    monkeypatch.setattr(reshard_comm.BroadcastCommunicator, "communicate", own)
    import importlib
    for module in standins.checked():  # each put back after the test: install() replaces them in this process
        for name in standins.OPS:
            monkeypatch.setattr(module, name, getattr(module, name))
    broadcast = importlib.import_module(next(iter(standins.BROADCAST)))
    monkeypatch.setattr(broadcast, "broadcast_input_data", broadcast.broadcast_input_data)
    cuda, seen = paddle.Tensor.cuda, []

    def communicate(self, read_items, state, context):  # Paddle's moves each tensor it broadcasts onto a GPU
        seen.append(paddle.ones([2]).cuda().place.is_cpu_place())
    monkeypatch.setattr(reshard_comm.BroadcastCommunicator, "communicate", communicate)
    assert "flex checkpoint's resharding broadcast given the CPU" in standins.install()
    reshard_comm.BroadcastCommunicator().communicate([], {}, {})
    assert seen == [True] and paddle.Tensor.cuda is cuda


def test_a_rank_that_dies_is_one_line_naming_it_every_rank_ended(torch_model):
    with pytest.raises(PipelineError, match=r"^rank 1 of 2 died \(exit code 3\); every rank ended \[PC423\]$"):
        split.compare_split(torch_model, pairs.dies_on_rank_1, pair.IDS, 2)
    assert multiprocessing.active_children() == []


def test_ranks_that_outlast_the_timeout_are_one_line_every_rank_ended(torch_model):
    start = time.monotonic()
    with pytest.raises(PipelineError, match=r"^rank (0, 1|0|1) of 2 did not finish in 1 s: (it had started|never started)"
                                            r", (as had every rank|the other ranks had [^;]+); every rank ended;.*"
                                            r"\[PC424\]$"):
        split.compare_split(torch_model, pair.build, pair.IDS, 2, timeout=1)
    assert multiprocessing.active_children() == [] and time.monotonic() - start < 10


def test_ranks_that_end_without_their_records_are_one_line_naming_the_one_behind(tmp_path):
    """Every rank ended with exit code 0, rank 1 before it started its work (as when two ranks took one number):
    said as that, not as a timeout."""
    ranks = split.Ranks(tmp_path, 2, timeout=60)
    ranks.processes = [multiprocessing.get_context("spawn").Process(target=int) for _ in range(2)]
    for p in ranks.processes:
        p.start()
    (tmp_path / "rank0").mkdir()
    (tmp_path / "rank0" / "stage.txt").write_text("3")
    ranks.deadline = time.monotonic() + 60
    start = time.monotonic()
    with pytest.raises(PipelineError, match=r"^rank 1 of 2 ended \(exit code 0\) without its record: never started, "
                                            r"the other ranks had recorded its modules \(run 1\); .*\[PC932\]$"):
        ranks.wait(lambda: False)
    assert time.monotonic() - start < 30 and multiprocessing.active_children() == []


def test_a_rank_that_hangs_is_named_the_one_waiting_for_it_is_not(torch_model):
    """Named once it has stayed behind the others `stall` seconds (rank 1 sleeps an hour), not at the launch's
    timeout: the ranks' start, which only the timeout bounds, takes 10-30 s on a loaded 2-core machine."""
    start = time.monotonic()
    with pytest.raises(PipelineError, match=r"^rank 1 of 2 did not move on for 5 s: it had set up fleet, the other "
                                            r"ranks had built its model \(run 1\); every rank ended;.* give stall= "
                                            r"more seconds .*\[PC424\]$"):
        split.compare_split(torch_model, pairs.hangs_on_rank_1, pair.IDS, 2, timeout=300, stall=5)
    assert multiprocessing.active_children() == [] and time.monotonic() - start < 300


def test_ranks_that_disagree_on_the_config_are_one_line_each_field():
    assert split.config_differences([{"num_hidden_layers": 2, "vocab_size": 64}, {"num_hidden_layers": 3,
                                     "vocab_size": 64}]) == ["num_hidden_layers: rank 0 2, rank 1 3"]
    assert split.config_differences([{"a": 1}, {"a": 1}]) == []


def test_a_fused_qkvs_gradients_are_cut_per_rank_and_a_parts_gradient_wrong_on_one_rank_is_named(reports):
    """compare_split_steps training examples/tiny_gpt_split.py's GPT (an Another of the launch) with its layouts: its
    qkv_proj fused per head and split across the ranks, each rank's gradients and weights of it cut into its heads'
    q, k and v, joined across the ranks part by part and judged against GPT-2's c_attn parts. Clean green; rank 1's
    k columns of layer 1 given twice their gradient (tests/split_pairs.py's k_grad_doubled_on_rank_1) red at that
    part alone, on rank 1 alone."""
    clean, planted = reports["backward"]["gpt"], reports["backward"]["gpt_k_doubled"]
    assert clean.passed and clean.ranks == {}, clean.table()
    judged = {r.name: r for r in clean.grads}
    for part in "qkv":
        row = judged[f"grad h.1.attn.c_attn.{part}.weight"]
        assert row.judged and row.shape == (32, 32), clean.table()
    assert not planted.passed and planted.first_diverging_gradient == "grad h.1.attn.c_attn.k.weight", \
        planted.table()
    assert planted.parted() == [1], planted.table()
    assert {r.name for r in planted.grads if not r.passed} == {"grad h.1.attn.c_attn.k.weight"}, planted.table()


@pytest.mark.parametrize("how", ["a rank dies", "interrupted"])
def test_layers_tp_failing_or_interrupted_leaves_nothing_it_made(tmp_path, monkeypatch, capsys, how):
    """`layers --tp 2` whose rank 1 dies before its model is built, or interrupted (Ctrl-C) while it waits for the
    ranks: its ranks' folder is gone, no process it started is left, and the --html page it was asked for is not
    written; a rank that dies is one line naming it."""
    import tempfile
    from portcheck import cli
    torch_dir, paddle_dir = write_pair(tmp_path / "pair", shard="10GB", num_hidden_layers=1, vocab_size=96)
    np.save(tmp_path / "ids.npy", pair.IDS["input_ids"])
    capsys.readouterr()  # what writing the folders logged
    made = tmp_path / "tmp"
    made.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(made))
    monkeypatch.setattr(split_folders, "Pretrained", lambda *args, **kwargs: pairs.dies_on_rank_1)
    if how == "interrupted":
        def interrupted(ranks, ready):
            raise KeyboardInterrupt
        monkeypatch.setattr(split.Ranks, "wait", interrupted)
    argv = ["layers", "--torch", str(torch_dir), "--paddle", str(paddle_dir), "--tp", "2", "--ids",
            str(tmp_path / "ids.npy"), "--html", str(tmp_path / "page.html")]
    with pytest.raises(SystemExit) as ended:
        cli.main(argv)
    assert list(made.iterdir()) == [] and not (tmp_path / "page.html").exists()
    assert multiprocessing.active_children() == []
    err = [line for line in capsys.readouterr().err.strip().splitlines() if "logits" not in line]  # transformers' note
    assert ended.value.code == (130 if how == "interrupted" else 2) and len(err) == 1, err
    if how == "a rank dies":
        assert re.search(r"rank 1 of 2 died \(exit code 3\); every rank ended \[PC423\]$", err[0]), err
