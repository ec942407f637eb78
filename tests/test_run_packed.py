"""`python -m portcheck run` on torch's packed attention and a head tied on one side (issue 61, items 8 and 9):
tests/packed/pt_lm.py, a tiny language model on torch's nn.TransformerEncoderLayer and nn.MultiheadAttention (q, k
and v packed in in_proj_weight) with a head of its own, against its port pd_lm.py on Paddle's (q_proj, k_proj,
v_proj Linears): paired with the library's layout for it without a flag, green as written, each plant red and
named, `check` on each hand-in agreeing; and --layouts FILE, the API's layouts in JSON, with the converse form it
declares: pt_qkv.py's q, k and v Linears against pd_qkv.py's one qkv Linear read per head (Fused on Paddle's side).

All sides run once (as test_run_loaders does it); each planted Paddle script is then run alone against the torch
sides and judged (run.run_side, run.judge)."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from portcheck.scripts import run
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy
from test_run_scripts import judged, paddle_planted

HERE = Path(__file__).resolve().parent / "packed"
STEPS = 2


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "out"
    run.prepare(out)
    statuses = {side: run.run_side(side, [sys.executable, str(HERE / f"{'pt' if fw == 'torch' else 'pd'}_lm.py")],
                                   out, STEPS) for side, fw in run.SIDES}
    return out, statuses


def paddle_judged(pair, tmp_path, replace=()):
    """(exit code, summary) of pd_lm.py with each (line, planted) of `replace` planted, judged against the torch sides
    (no plant: the pair's own Paddle run)."""
    return paddle_planted(pair, tmp_path, HERE / "pd_lm.py", replace, STEPS)


def test_the_packed_layers_pair_with_paddles_split_projections_green(pair, tmp_path):
    """Each packed module's q, k and v rows fill Paddle's q_proj, k_proj and v_proj (no flag), and are judged: the
    gradients and weights of each part, the attention's output whole. The hand-in's check agrees."""
    code, said = paddle_judged(pair, tmp_path)
    assert code == 0 and "green: the same run" in said, said
    t = load_npy(tmp_path / "out" / "torch" / "record.npy")
    for name in ("encoder.self_attn", "pool"):
        assert f"fused/{name}/q_proj,k_proj,v_proj" in t
        for part in ("q_proj", "k_proj", "v_proj"):
            assert f"grad/{name}.{part}.in_proj_weight" in t and f"grad/{name}.{part}.in_proj_bias" in t
    rows = (tmp_path / "out" / "log_reprod" / "bp_align_diff.log").read_text()
    assert "grad encoder.self_attn.k_proj.in_proj_weight  (8, 8)" in rows and "grad pool.v_proj.in_proj_bias" in rows
    pairs = pair[1]["paddle"]["config"]["pairs"]
    assert pairs["encoder.self_attn.k_proj"] == "encoder.self_attn.k_proj" and pairs["pool.v_proj"] == "pool.v_proj"
    check = checked(tmp_path)
    assert check.returncode == 0 and "config: green" in check.stdout, check.stdout + check.stderr


def checked(tmp_path):
    """`python -m portcheck check` on the hand-in judged in tmp_path/out."""
    return subprocess.run([sys.executable, "-m", "portcheck", "check", str(tmp_path / "out" / "log_reprod"),
                           "--only", ",".join(("config", *run.PAIRS))], capture_output=True, text=True)


BIAS = ("        self.encoder = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout)",
        "        self.encoder = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout, bias_attr=False)")
HEADS = ("        self.encoder = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout)",
         "        self.encoder = nn.TransformerEncoderLayer(dim, 2 * heads, 2 * dim, dropout)")
TIED = [("        self.lm_head = nn.Linear(dim, vocab, bias_attr=False)\n", ""),
        ("        return self.lm_head(h)", "        return paddle.matmul(h, self.wte.weight, transpose_y=True)")]
# an lm head in a layer of the port's own holding its weight [vocab, dim] (paddlenlp's OPTLMHead's decoder_weight)
OWN_HEAD = [("class TinyLM(nn.Layer):", """class LMHead(nn.Layer):
    def __init__(self, dim, vocab):
        super().__init__()
        self.decoder_weight = self.create_parameter([vocab, dim])

    def forward(self, h):
        return paddle.matmul(h, self.decoder_weight, transpose_y=True)


class TinyLM(nn.Layer):"""), ("        self.lm_head = nn.Linear(dim, vocab, bias_attr=False)",
                              "        self.lm_head = LMHead(dim, vocab)")]
MISREAD = ("        return paddle.matmul(h, self.decoder_weight, transpose_y=True)",
           "        return paddle.matmul(h, self.decoder_weight.reshape([h.shape[-1], -1]))")
NO_EXP = ("        return self.lm_head(h) * self.logit_scale.exp()", "        return self.lm_head(h) * self.logit_scale")


def test_two_plants_in_one_paddle_run_are_each_red_and_named(pair, tmp_path):
    """The encoder's attention with twice the heads (the packed parts judged: red at the attention, on torch's values)
    and the head tied to the embedding on Paddle's side alone (red, naming the tie; before, refused): one Paddle run
    for both, each named by its own line. The encoder's activation planted in the same run is named too (before,
    only placed: "their own computation differs: encoder (before encoder.dropout)"). The hand-in's check says what
    run said."""
    heads_gelu = (HEADS[0], HEADS[1].replace("dropout)", 'dropout, activation="gelu")'))
    code, said = paddle_judged(pair, tmp_path, [heads_gelu, *TIED])
    assert code == 1, said
    assert re.search(r"forward, each module on torch's values: RED, their own computation differs: "
                     r".*encoder\.self_attn", said), said
    activation = "DIFFERS encoder (TransformerEncoderLayer): activation torch relu vs paddle gelu"
    assert "DIFFERS tied weights: paddle's wte.weight is also its head (a matmul with it: nothing paddle holds takes " \
           "torch's lm_head.weight), torch holds them apart (lm_head.weight and wte.weight): the head is untied on " \
           "torch's side" in said and activation in said and "RED: 2 configuration difference(s)" in said, said
    check = checked(tmp_path)
    assert check.returncode == 1 and activation in check.stdout, check.stdout


BARE = [("        self.lm_head = nn.Linear(dim, vocab, bias_attr=False)",
         "        self.lm_head_weight = self.create_parameter([dim, vocab])"),
        ("        return self.lm_head(h)", "        return paddle.matmul(h, self.lm_head_weight)")]
HELD = {"the head a bare parameter [in, out] of the model": (BARE, r"grad lm_head\.weight +\(8, 13\)"),
        "the head a layer of the port's own holding [vocab, dim]": (OWN_HEAD, r"grad lm_head\.weight +\(8, 13\)")}


@pytest.mark.parametrize("form, plant", [(list(HELD)[0], False), (list(HELD)[1], False), (list(HELD)[1], True)],
                         ids=["bare head", "own head layer", "own head layer misread, scale not exponentiated"])
def test_a_head_and_a_scalar_the_port_holds_otherwise_start_from_torchs_and_are_judged(pair, tmp_path, form, plant):
    """torch's lm_head a Linear and its logit_scale 0-d; the port's head a bare parameter [in, out] of the model it
    multiplies itself (CLIP's text_projection in paddlenlp), or a layer of its own holding the weight [vocab, dim]
    (OPTLMHead's decoder_weight), and its logit_scale [1] (in every run of this file): started from torch's values,
    each gradient and step judged under torch's name, green, `check` on the hand-in agreeing. Plants: the own
    layer's weight read by a reshape and the scale not exponentiated, red at lm_head and at the model (the bare
    head's module is the model: the same place). Before: refused, "torch lm_head.weight has no Paddle counterpart;
    Paddle lm_head_weight no torch tensor fills" (decoder_weight the same), and "torch logit_scale [] vs Paddle
    logit_scale [1]" [PC831]."""
    replace, grad = HELD[form]
    code, said = paddle_judged(pair, tmp_path, [*replace, MISREAD, NO_EXP] if plant else replace)
    if plant:
        differs = re.search(r"their own computation differs: (.*) \[PC834\]", said)
        assert code == 1 and differs and differs.group(1).split(", ") == ["lm_head", "(model)"], said
        return
    assert code == 0 and "green: the same run" in said, said
    rows = (tmp_path / "out" / "log_reprod" / "bp_align_diff.log").read_text()
    assert re.search(grad, rows) and re.search(r"grad logit_scale +\(\)", rows), rows
    if replace is OWN_HEAD:  # the hand-in checked once (a process of its own)
        check = checked(tmp_path)
        assert check.returncode == 0, check.stdout + check.stderr


def test_a_refusal_lists_every_problem_it_counts(pair, tmp_path, capfd):
    """The Paddle encoder built without biases: its modules do not pair with torch's, and the one line says each
    tensor concerned (before, it listed 4 of those it counted), each packed part among them; said once, by run
    (the script's own process prints nothing of it: before, its stderr said it too)."""
    capfd.readouterr()
    with pytest.raises(PipelineError, match="cannot start from the torch model's weights") as e:
        paddle_judged(pair, tmp_path, [BIAS])
    printed = capfd.readouterr()
    assert "torch model's weights" not in printed.out + printed.err, printed.err[-2000:]
    said = str(e.value).partition("problem(s)): ")
    count, listed = int(said[0].rpartition("(")[2].split()[0]), said[2].split("; ")
    assert count == len(listed) > 4, str(e.value)
    # torch tensors left over and Paddle ones unfilled: the flag that declares one module against several
    assert str(e.value).endswith(". A module computing several of the other side's in one (q, k and v in one "
                                 "Linear) is declared with --layouts FILE (docs/run.md) [PC831]"), str(e.value)
    assert "torch encoder.self_attn.v_proj.in_proj_bias has no Paddle counterpart" in listed, listed
    assert "torch encoder.linear1.weight and Paddle encoder.linear1.weight, one shape, in modules that do not pair: " \
           "they hold other tensors (a bias on one side alone?)" in listed, listed


# --layouts FILE: the declarations the library's calls take as layouts=, in JSON
def test_a_layouts_file_declares_what_the_api_takes():
    from portcheck.mapping import recipes
    from portcheck.mapping.layouts import from_json
    assert from_json({"c_attn": {"fused": ["q", "k", "v"]}, "qkv_proj": {"fused": ["q", "k", "v"], "heads": 4}}) == \
        recipes.paddlenlp_gpt(4, fused=True)
    assert from_json({"MultiheadAttention": {"fused": ["q_proj", "k_proj", "v_proj"], "output": False}}) == \
        recipes.TORCH_ATTENTION
    assert from_json({"LlamaLMHead": "transpose", "qkv_proj": {"fused": ["q_proj", "k_proj", "v_proj"], "heads": 4}}) == \
        recipes.paddlenlp_llama(fused_qkv=True, num_attention_heads=4, num_key_value_heads=4)


BAD = [('["c_attn"]', "a JSON object is expected"), ('{"c_attn": "fused"}', "'c_attn': \"fused\" is not a layout"),
       ('{"c_attn": {"fused": ["q", "k", "v"], "heads": true}}', "is not a layout"),
       ('{"c_attn": {"fused": ["q", "k", "v"], "order": 1}}', "is not a layout"),
       ('{"c_attn": {"fused": ["q"]}}', "'c_attn': Fused: parts must be two or more distinct names"),
       ('{"c_attn": ', "cannot be read as JSON"), ("[" * 100000 + "]" * 100000, "cannot be read as JSON"),
       (" " * (run.LAYOUTS_MAX + 1), "more than")]


@pytest.mark.parametrize("text, why", BAD, ids=[b[1][:30] for b in BAD])
def test_a_layouts_file_that_is_not_one_is_one_line(tmp_path, text, why):
    (tmp_path / "layouts.json").write_text(text)
    said = f"^--layouts {tmp_path / 'layouts.json'}: .*{re.escape(why)}"
    with pytest.raises(PipelineError, match=said):
        run.read_layouts(tmp_path / "layouts.json")


def test_a_layouts_fifo_folder_or_missing_file_is_refused_unread_and_the_cli_says_it_in_one_line(tmp_path):
    import os
    os.mkfifo(tmp_path / "fifo")
    for name in ("fifo", "missing.json", "."):
        with pytest.raises(PipelineError, match="cannot be read as JSON"):
            run.read_layouts(tmp_path / name)
    (tmp_path / "bad.json").write_text('{"c_attn": 3}')
    proc = subprocess.run([sys.executable, "-m", "portcheck", "run", "--torch", "python pt.py", "--paddle",
                           "python pd.py", "--layouts", "bad.json"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: --layouts bad.json: 'c_attn': 3 is not a layout: give 'same' "
                                                "or 'transpose' or 'swapped', or {\"fused\": [parts], \"heads\": n, \"output\": "
                                                "false} (heads and output optional) [PC312]"], proc.stderr
    assert run.read_layouts(None) == {} and not (tmp_path / "portcheck_run").exists()


def test_each_side_reads_the_files_layouts_and_torchs_packed_attention_needs_none(tmp_path):
    """The declarations reach each side's recorder (run.read_layouts' settings, recorder.Run), where the torch side
    gives every packed MultiheadAttention the library's layout unless the file declares it, and none to one holding
    q, k and v apart (kdim: q_proj_weight, k_proj_weight, v_proj_weight)."""
    from types import SimpleNamespace

    import torch

    from portcheck.scripts import recorder
    from portcheck.mapping.fused import Fused
    from portcheck.scripts.hooks_torch import TorchSide
    (tmp_path / "l.json").write_text(json.dumps({"pool": {"fused": ["q", "k", "v"], "output": False}}))
    settings = {"side": "torch", "steps": 1, "out": str(tmp_path), **run.read_layouts(tmp_path / "l.json")}
    given = recorder.Run(settings, SimpleNamespace(versions=dict)).layouts
    assert given == {"pool": Fused(("q", "k", "v"), output=False)}
    model = torch.nn.ModuleDict({"enc": torch.nn.TransformerEncoderLayer(8, 2, 16), "pool": torch.nn.MultiheadAttention(
        8, 2), "cross": torch.nn.MultiheadAttention(8, 2, kdim=4, vdim=4)})
    assert TorchSide(False).packed(model, given) == {"enc.self_attn": Fused(("q_proj", "k_proj", "v_proj"),
                                                                            output=False)}


# The converse: torch's q, k and v in three Linears, Paddle's in one fused qkv Linear (its columns per head, as
# paddlenlp's fuse_attention_qkv holds them), declared in --layouts FILE as the API's layouts= declares it
QKV = {"qkv": {"fused": ["q", "k", "v"], "heads": 2}}


@pytest.fixture(scope="module")
def qkv_pair(tmp_path_factory):
    where = tmp_path_factory.mktemp("qkv")
    (where / "layouts.json").write_text(json.dumps(QKV))
    settings = run.read_layouts(where / "layouts.json")
    out = where / "out"
    run.prepare(out)
    statuses = {side: run.run_side(side, [sys.executable, str(HERE / f"{'pt' if fw == 'torch' else 'pd'}_qkv.py")],
                                   out, STEPS, **settings) for side, fw in run.SIDES}
    return out, statuses, settings


def qkv_judged(qkv_pair, tmp_path, replace=()):
    """(exit code, summary) of pd_qkv.py with each (line, planted) of `replace` planted, run with the pair's
    --layouts and judged against its torch sides (no plant: the pair's own Paddle run)."""
    out, statuses, settings = qkv_pair
    mine = tmp_path / "out"
    shutil.copytree(out, mine)
    if replace:
        text = (HERE / "pd_qkv.py").read_text()
        for line, planted in replace:
            assert text.count(line) == 1, line
            text = text.replace(line, planted)
        (tmp_path / "pd_qkv.py").write_text(text)
        statuses = {**statuses, "paddle": run.run_side("paddle", [sys.executable, str(tmp_path / "pd_qkv.py")], mine,
                                                        STEPS, **settings)}
    return judged(mine, statuses, STEPS)


def test_a_paddle_fused_qkv_against_torchs_three_linears_is_filled_and_green(qkv_pair, tmp_path):
    """--layouts declares Paddle's qkv fused: torch's q, k and v fill its columns per head (joined as convert joins
    them), and each part is judged against torch's Linear of its own: outputs, gradients, weights. Before, refused
    ("torch attn.q.weight has no Paddle counterpart; ... Paddle attn.qkv.weight no torch tensor fills")."""
    code, said = qkv_judged(qkv_pair, tmp_path)
    assert code == 0 and "green: the same run" in said, said
    assert qkv_pair[1]["paddle"]["config"]["pairs"]["attn.k"] == "attn.qkv.k"
    rows = (tmp_path / "out" / "log_reprod" / "bp_align_diff.log").read_text()
    assert "grad attn.k.weight    (8, 8)" in rows and "grad attn.v.bias" in rows and "same run: passed" in rows, rows
    check = checked(tmp_path)
    assert check.returncode == 0 and "config: green" in check.stdout, check.stdout + check.stderr


# docs/run.md's --layouts example: torch's q, k and v in one Linear whose output the forward chunks (q, then k, then
# v), Paddle's in three Linears
FUSED = {"qkv": {"fused": ["q", "k", "v"]}}


def test_a_torch_fused_qkv_against_paddles_three_linears_is_refused_without_the_file_and_green_with_it(tmp_path):
    """Without --layouts the Paddle side cannot start from torch's weights: each of the 8 tensors said, the line
    ending with the flag. With the file (every side reads it) the parts start from torch's rows and the run is
    green."""
    argv = {"torch": [sys.executable, str(HERE / "pt_fused.py")], "paddle": [sys.executable, str(HERE / "pd_split.py")]}
    bare = tmp_path / "bare"
    run.prepare(bare)
    run.run_side("torch", argv["torch"], bare, STEPS)
    with pytest.raises(PipelineError, match="cannot start from the torch model's weights") as e:
        run.run_side("paddle", argv["paddle"], bare, STEPS)
    said = str(e.value).partition("problem(s)): ")
    count, listed = int(said[0].rpartition("(")[2].split()[0]), said[2].split("; ")
    assert count == len(listed) == 8 and "torch attn.qkv.weight has no Paddle counterpart" in listed, str(e.value)
    assert str(e.value).endswith("is declared with --layouts FILE (docs/run.md) [PC831]"), str(e.value)
    (tmp_path / "layouts.json").write_text(json.dumps(FUSED))
    settings = run.read_layouts(tmp_path / "layouts.json")
    out = tmp_path / "out"
    run.prepare(out)
    statuses = {side: run.run_side(side, argv[fw], out, STEPS, **settings) for side, fw in run.SIDES}
    code, said = judged(out, statuses, STEPS)
    assert code == 0 and "green: the same run" in said, said
    assert statuses["paddle"]["config"]["pairs"]["attn.qkv.k"] == "attn.k"


SWAPPED = ("        q, k, v = qkv.split(3, axis=-1)", "        k, q, v = qkv.split(3, axis=-1)")


def test_a_paddle_fused_qkv_read_in_the_wrong_order_is_red_at_the_attention(qkv_pair, tmp_path):
    """q and k swapped in the Paddle script's reading of its packed columns: the parts, filled and judged as
    declared, agree; the attention that reads them is red, named."""
    code, said = qkv_judged(qkv_pair, tmp_path, [SWAPPED])
    assert code == 1, said
    assert "forward, each module on torch's values: RED, their own computation differs: attn" in said, said


def test_a_paddle_fused_qkv_torch_cannot_fill_is_refused_naming_every_tensor(qkv_pair, tmp_path):
    """Paddle's qkv built without a bias: torch's q, k and v biases have no Paddle tensor, each said, as many listed
    as counted."""
    with pytest.raises(PipelineError, match="cannot start from the torch model's weights") as e:
        qkv_judged(qkv_pair, tmp_path, [("nn.Linear(dim, 3 * dim)", "nn.Linear(dim, 3 * dim, bias_attr=False)")])
    said = str(e.value).partition("problem(s)): ")
    count, listed = int(said[0].rpartition("(")[2].split()[0]), said[2].split("; ")
    assert count == len(listed) == 7, str(e.value)
    assert "torch attn.v.bias has no Paddle counterpart" in listed and listed[-1].startswith(
        "Paddle attn.qkv.weight no torch tensor fills. --layouts declares Paddle's attn.qkv fused, and its part(s) "
        "attn.qkv.q, attn.qkv.k, attn.qkv.v pair with no torch module"), listed


def test_the_paddle_side_joins_torchs_parts_per_head_and_says_each_part_it_cannot():
    """PaddleSide._join, numpy alone: torch's q, k, v (Paddle's layout, [in, out]) placed per head in qkv's columns
    (head 0's q, k, v, then head 1's); a part no torch tensor fills, a part of another shape, and a part's tensor the
    fused module does not hold, each one problem naming it."""
    from types import SimpleNamespace

    import numpy as np

    from portcheck.mapping.fused import Fused
    from portcheck.scripts.hooks_paddle import PaddleSide
    side, rng = SimpleNamespace(joins={}), np.random.default_rng(0)
    q, k, v = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(3))
    parts = {"attn.qkv.q.weight": q, "attn.qkv.k.weight": k, "attn.qkv.v.weight": v}
    params = {"attn.qkv.weight": np.zeros((8, 24), np.float32)}
    torch_keys = {key: f"attn.{key.split('.')[2]}.weight" for key in parts}
    state, said = {}, set()
    assert PaddleSide._join(side, {"attn.qkv": Fused(("q", "k", "v"), heads=2)}, parts, params, state, torch_keys,
                            said) == []
    assert np.array_equal(state["attn.qkv.weight"], np.concatenate([q[:, :4], k[:, :4], v[:, :4], q[:, 4:], k[:, 4:],
                                                                    v[:, 4:]], axis=1))
    assert side.joins == {"attn.qkv.weight": (Fused(("q", "k", "v"), heads=2), list(parts))}
    parts = {"attn.qkv.q.weight": q, "attn.qkv.k.weight": k, "attn.qkv.q.bias": q[0], "attn.qkv.k.bias": k[0],
             "attn.qkv.v.bias": v[0, :4], "attn.qkv.q.scale": q[0]}
    params["attn.qkv.bias"] = np.zeros(24, np.float32)
    torch_keys = {key: f"attn.{key.split('.')[2]}.{key.split('.')[3]}" for key in parts}
    state, said = {}, set()
    problems = PaddleSide._join(side, {"attn.qkv": Fused(("q", "k", "v"), heads=2)}, parts, params, state, torch_keys,
                                said)
    assert sorted(problems) == sorted([
        "Paddle attn.qkv.weight no torch tensor fills whole: its part(s) attn.qkv.v pair with no torch module",
        "torch attn.q.bias + attn.k.bias + attn.v.bias [8] + [8] + [4] vs Paddle attn.qkv.bias [24] (its Fused: 3 "
        "parts of 2 heads)",
        "torch attn.q.scale has no Paddle counterpart (Paddle attn.qkv.q pairs with its module, and attn.qkv holds no "
        "scale)"]), problems
    assert state == {} and said == {"attn.qkv.weight", "attn.qkv.bias"}
