"""The zoo's fast part (tools/zoo/cases.py, the cases marked fast: schedulers, optimizers, losses, metrics and
loaders): every correct port and every plant judged through portcheck's public API, its verdict asserted to be
the table's (a correct port green at each of its rules; a plant red at its step, named at its place).

A verdict the library gets wrong today is declared in the table (`known`, with its issue) and runs here as a
strict xfail: the day it is fixed the test fails, and the table's line must go. The whole zoo, models and
training included: `python -m tools.zoo.run` (docs/zoo.md, its figures docs/bench/zoo.md)."""
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("paddle")
pytest.importorskip("sklearn")

from tools.zoo import cases, run  # noqa: E402 (after the skips)

RUNS = [pytest.param(case, plant, id=f"{case['name']}: {plant['name'] if plant else 'correct port'}",
                     marks=[pytest.mark.xfail(strict=True, reason=f"issue {known['issue']}: {known['why']}")]
                     if (known := (plant or case).get("known")) else [])
        for case in cases.CASES if case.get("fast") and not case.get("skip") for plant in run.runs(case)]


@pytest.mark.parametrize("case, plant", RUNS)
def test_the_librarys_verdict_is_the_tables(case, plant):
    judgements, error = run.run_one(case, plant)
    result = run.outcome(case, plant, judgements, error)
    assert result["got"] == "ok", f"{result['got']}: expected {run.expected(case, plant)}; {run.said(result)}"


def test_the_table_is_well_formed():
    """Names unique, every plant at a step its case covers, with a place and a cause; known marks name an issue."""
    table = cases.by_name()
    assert len(table) == len(cases.CASES)
    for case in cases.CASES:
        for plant in case["plants"]:
            assert set(run.steps_of(plant)) <= set(case["steps"]), (case["name"], plant["name"])
            assert "where" in plant and plant["cause"], (case["name"], plant["name"])
        for known in [case.get("known")] + [p.get("known") for p in case["plants"]]:
            assert known is None or (isinstance(known["issue"], int) and known["why"]), case["name"]


def test_a_refused_plant_is_ok_only_when_refused_saying_its_text_at_its_place():
    """A plant the library must refuse before judging (`refused`): its one line must say the text and the place;
    another error, or judgements with no refusal, is a mismatch."""
    from tools.zoo.checks.judging import Judgement
    plant = {"name": "a config difference", "step": 1, "where": "token_type", "refused": "configs differ",
             "cause": "another type_vocab_size"}
    case = {"name": "a pair", "group": "model", "steps": (1,), "plants": [plant]}
    got = lambda error, judgements=(): run.outcome(case, plant, list(judgements), error)["got"]
    assert got("portcheck: torch token_type against Paddle token_type: the two models' configs differ there") == "ok"
    assert got("portcheck: torch word against Paddle word: the two models' configs differ there") == "error"
    assert got("portcheck: 1 torch module(s) have no counterpart: token_type") == "error"
    assert got("", [Judgement("forward, every module (K=16)", 1, False, 2.0, "token_type")]) == "not refused"


# the zoo's pairs a conversion without a run refuses (tie: BERT's output.LayerNorm against norm1 and norm2, OPT's
# final_layer_norm; the others refusing are BERT's kin): each its smallest with a run. GPT-2 converts with no map,
# with its recipe's layouts (its h.N and decoder.layers.N are lists of like blocks, paired by index: mapping.lists,
# test_moe.py) and without (a fused module's tie taken: test_a_fused_module_the_ties_show_is_taken_with_no_map)
SUGGESTING = ("bert", "opt")


@pytest.mark.parametrize("name", SUGGESTING)
def test_every_map_a_refusal_of_the_zoo_suggests_pasted_into_its_correct_port_is_green(name):
    """What a refusal tells the user to give, given on the zoo's correct port: green. Before, a conversion without
    a run suggested the map taking each tie's first candidate (norm1 for output.LayerNorm), and pasted it was red
    at the first norm; the run settles the ties, so inputs= is what it says. A conversion's run looks at no value
    (its weights are not torch's yet): it suggested c_proj -> q_proj, refused pasted; now the layouts alone."""
    import ast
    import re
    import torch
    import paddle
    from portcheck import compare_forward, convert
    from portcheck.core.errors import PipelineError
    from tools.zoo.checks import models
    torch.manual_seed(0)
    paddle.seed(0)
    import portcheck
    ran = name.endswith("no layouts")
    pt, pd, x, layouts = models.MODELS[name.partition(",")[0]]({})
    layouts = None if ran else layouts
    with pytest.raises(PipelineError) as refused:
        convert(pt, pd, layouts=layouts, inputs=x if ran else None)
    said = str(refused.value)
    every = re.findall(r"\(name_map=(\[.*?\]) takes each one's first candidate\)", said)
    given = [(ast.literal_eval(m), layouts, ran) for m in every]  # (name_map, layouts, with the run)
    given += [(None, layouts, True)] if "give inputs= to pair them" in said else []
    given += [(None, eval(m, {"portcheck": portcheck}), ran) for m in re.findall(r"layouts=(\{.*?\}) \(heads=", said)]
    assert given, said
    for name_map, layouts, run in given:
        pd.set_state_dict(convert(pt, pd, name_map, inputs=x if run else None, layouts=layouts))
        report = compare_forward(pt.eval(), pd.eval(), x, name_map, layouts=layouts)
        assert report.passed, (said, name_map, report.table())


def test_a_fused_module_the_ties_show_is_taken_with_no_map():
    """GPT-2's c_attn (one Conv1D, [q | k | v]) against paddlenlp's q_proj, k_proj and v_proj, with no layouts:
    before, refused (c_proj fits q_proj, k_proj, v_proj and out_proj equally, PC317) with the Fused entry to paste;
    now taken as that entry, said in one line, and each part judged: green clean, forward and a backward step; a
    port reading q_proj's weight [out, in] red at c_attn's q part."""
    import numpy as np
    import torch
    import paddle
    from portcheck import compare_backward, compare_forward, convert
    from tools.zoo.checks import models
    torch.manual_seed(0)
    paddle.seed(0)
    pt, pd, x, _ = models.MODELS["gpt2 split"]({})
    state = convert(pt, pd, inputs=x)
    assert set(state.fused_found) == {"c_attn"} and "c_attn as portcheck.Fused(('q_proj', 'k_proj', 'v_proj'))" \
        in state.said
    pd.set_state_dict(state)
    assert compare_forward(pt.eval(), pd.eval(), x, isolate=True, layouts=state.fused_found).passed
    y = np.random.RandomState(1).randn(2, 12, 32).astype("float32")
    loss = (lambda o, t: ((o.last_hidden_state - t) ** 2).mean(), lambda o, t: ((o - t) ** 2).mean())
    sgd = (lambda ps: torch.optim.SGD(ps, lr=0.01), lambda ps: paddle.optimizer.SGD(0.01, parameters=ps))
    start = {k: v.clone() for k, v in pt.state_dict().items()}
    backward = compare_backward(pt.train(), pd.train(), x, y, loss=loss, optimizer=sgd)  # no layouts: taken too
    assert backward.passed and set(backward.fused_found) == {"c_attn"}, backward.table()
    pt.load_state_dict(start)
    pd.set_state_dict(state)
    w = pd.decoder.layers[0].self_attn.q_proj.weight
    w.set_value(w.numpy().T.copy())
    report = compare_forward(pt.eval(), pd.eval(), x, layouts=state.fused_found)
    red = [r.name for r in report.paired if not r.passed]
    assert red[0] == "h.0.attn.c_attn.q_proj", red[:3]


# the architectures the issue of the whole zoo names, as paddlenlp 2.8.1 spells their directories
NAMED = ("albert bart bert bigbird blenderbot blip bloom chineseclip clip codegen convbert ctrl deberta deberta_v2 "
         "distilbert electra funnel gpt gptj layoutlm llama luke mbart megatronbert mixtral mobilebert mpnet mt5 "
         "nystromformer opt pegasus prophetnet rembert roberta roformer squeezebert t5 xlm xlnet").split()


def test_the_families_tool_finds_every_architecture_both_libraries_ship():
    """tools/zoo/families.py enumerates paddlenlp's architectures with a transformers counterpart (each its base
    model class on both sides); its whole run is `python -m tools.zoo.families` (docs/zoo.md)."""
    from tools.zoo import families
    found = dict(families.families())
    assert set(NAMED) <= set(found), sorted(set(NAMED) - set(found))
    assert len(found) >= 45 and found["gpt"] == "gpt2" and found["chineseclip"] == "chinese_clip"
    # transformers' deprecated models are shipped too, and paddlenlp's rw is transformers' Falcon
    assert (found["nezha"], found["ernie_m"], found["rw"]) == ("deprecated.nezha", "deprecated.ernie_m", "falcon")
    assert [c.__name__ for c in families.classes("rw", "falcon")] == ["RWModel", "FalconModel"]


def test_clip_converts_with_no_map():
    """transformers' CLIP holds text_projection and visual_projection as Linears and logit_scale 0-d; paddlenlp's
    as bare parameters [in, out] of the model and logit_scale [1]. Before: refused, `visual_projection (Linear)` and
    `text_projection (Linear)` with no counterpart (PC315), no map could say it."""
    import numpy as np
    from portcheck import convert
    from tools.zoo import families
    pt, pd, x = families.build("clip", "clip")
    state = convert(pt, pd, inputs=x)
    assert state.origin["text_projection"] == "text_projection.weight"
    assert state.origin["vision_projection"] == "visual_projection.weight"
    assert np.array_equal(pd.text_projection.numpy(), pt.text_projection.weight.detach().numpy().T)
    assert pd.logit_scale.shape == [1] and float(pd.logit_scale.numpy()[0]) == float(pt.logit_scale.detach())


@pytest.mark.xfail(strict=True, reason="a difference of paddlenlp 2.8.1's port (docs/zoo.md, What the zoo finds in "
                   "the ports): DebertaV2Encoder returns its own input as its first output when return_dict is False")
def test_paddlenlp_deberta_v2_encoders_first_output_is_its_last_layers_as_transformers():
    """transformers' DebertaV2Encoder returns (last layer's output, hidden states, ...); paddlenlp's, with
    return_dict=False (its default), `tuple(v for v in [hidden_states, ...])`: hidden_states is the encoder's
    input, the embeddings' output (0.065 from transformers' on the zoo's tiny config). DebertaV2Model reads the
    hidden states, so the model's own output agrees. Fails (xpass) the day paddlenlp returns output_states."""
    import numpy as np
    import paddle
    from tools.zoo import families
    pd_cls, _ = families.classes("deberta_v2", "deberta_v2")
    paddle.seed(0)
    pd = pd_cls(pd_cls.config_class(**families.TINY))
    pd.eval()
    seen = {}
    pd.encoder.register_forward_post_hook(lambda m, i, o: seen.update(given=i[0].numpy(), first=o[0].numpy()))
    pd(input_ids=paddle.to_tensor(np.random.RandomState(0).randint(3, 100, (2, 12))))
    assert not np.array_equal(seen["first"], seen["given"]), "its first output is its input, handed back"


def test_the_first_differing_call_is_at_the_models_own_line_not_a_librarys_output_helper():
    """transformers' BERT against paddlenlp's, the query's weight read [out, in] in the port: the first call that
    differs is named on each side at the line calling the projection (transformers' modeling_bert.py `self.query`,
    paddle.nn's MultiHeadAttention `self.q_proj`: paddlenlp's BERT is paddle.nn.TransformerEncoder). Before, Paddle's
    was paddlenlp's model_outputs.py:83, the encoder layer's forward it puts in Paddle's place, calling the attention."""
    import linecache
    from portcheck import compare_forward, convert
    from tools.zoo import families
    pt, pd, x = families.build("bert", "bert")
    pd.set_state_dict(convert(pt, pd, inputs=x))
    dict((n, e) for n, _, e in families.plants(pd))["encoder.layers.0.self_attn.q_proj's weight read [out, in]"]()
    report = compare_forward(pt, pd, x)
    call = report.first_call
    assert call is not None and call.found, report.table()
    said = {side: (site.file.replace("\\", "/"), linecache.getline(site.file, site.line))
            for side, site in (("torch", call.torch), ("Paddle", call.paddle))}
    assert said["torch"][0].endswith("transformers/models/bert/modeling_bert.py") and "self.query(" in said["torch"][1]
    assert said["Paddle"][0].endswith("paddle/nn/layer/transformer.py") and "self.q_proj(" in said["Paddle"][1], said
    assert not any(helper in report.table() for helper in ("model_outputs.py", "modeling_outputs.py", "generic.py"))


@pytest.mark.xfail(strict=True, reason="a difference of paddlenlp 2.8.1's port (docs/zoo.md, What the zoo finds in "
                   "the ports): FNetBasicFourierTransform's paddle.fft.fftn transforms the batch axis too")
def test_paddlenlp_fnets_fourier_transform_keeps_each_sample_to_itself_as_transformers():
    """transformers' FNet mixes tokens with torch.fft.fftn(x, dim=(1, 2)): the sequence and hidden axes of each
    sample; paddlenlp's calls paddle.fft.fftn(x) with no axes, all three, the batch's too: a sample's output
    depends on the others in its batch (10.4 from transformers' at encoder.layer.0.fourier.self on the zoo's tiny
    config, batch 2; a batch of one agrees). Fails (xpass) the day paddlenlp transforms the last two axes alone."""
    import numpy as np
    import paddle
    from paddlenlp.transformers.fnet.modeling import FNetBasicFourierTransform
    x = np.random.RandomState(0).randn(2, 12, 32).astype("float32")
    out = FNetBasicFourierTransform()(paddle.to_tensor(x))[0].numpy()
    assert np.allclose(out, np.fft.fftn(x, axes=(1, 2)).real, atol=1e-3), "each sample's transform reads the others"


def test_the_families_epsilon_plant_is_one_paddle_runs_red_at_its_norm():
    """The families' first plant, a norm's epsilon read from the other side's default. Before: 1e-2, above the 1e-3
    Paddle's LayerNorm takes: the Paddle run raised, and the plant was reported as the pairing's refusal or a red
    at the model's output (bert, distilbert, electra, ernie, layoutlm, roberta, opt), never at the norm."""
    from portcheck import compare_forward, convert
    from tools.zoo import families
    pt, pd, x = families.build("bert", "bert")
    pd.set_state_dict(convert(pt, pd, inputs=x))
    (name, module, edit), = [p for p in families.plants(pd) if "epsilon" in p[0]]
    edit()
    report = compare_forward(pt.eval(), pd.eval(), x)
    assert not report.passed and not report.stopped, report.table()
    assert module in report.both(report.first_diverging), (name, report.table())


def _paddle_forward(family: str, finding: str):
    """paddlenlp's base model of `family` on the zoo's tiny config, run on the zoo's input_ids: an AssertionError
    where it raises the finding's error (a strict xfail's expected failure), any other error as it is."""
    import numpy as np
    import paddle
    from tools.zoo import families
    pd_cls, _ = families.classes(family, dict(families.families())[family])
    paddle.seed(0)
    pd = pd_cls(pd_cls.config_class(**{**families.TINY, **families.OVERRIDES.get(family, {})}))
    pd.eval()
    try:
        pd(input_ids=paddle.to_tensor(np.random.RandomState(0).randint(3, 100, (2, 12))))
    except ValueError as e:
        assert finding not in str(e), f"{family}: {str(e).splitlines()[0]}"
        raise


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="a difference of paddlenlp 2.8.1's port "
                   "(docs/zoo.md, What the zoo finds in the ports): CodeGenAttention hands paddle.where a float "
                   "causal mask")
def test_paddlenlp_codegen_forward_runs_on_the_current_paddle():
    """paddlenlp's CodeGenAttention builds causal_mask with paddle.get_default_dtype() (float32) and calls
    paddle.where(causal_mask, ...); Paddle 3 takes a boolean condition only: ValueError on any input.
    transformers' holds the mask as torch.bool. Fails (xpass) the day paddlenlp's forward runs."""
    _paddle_forward("codegen", "expected to be a boolean Tensor")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="a difference of paddlenlp 2.8.1's port "
                   "(docs/zoo.md, What the zoo finds in the ports): GPTJAttention hands paddle.where a float "
                   "causal mask")
def test_paddlenlp_gptj_forward_runs_on_the_current_paddle():
    """paddlenlp's GPTJAttention registers its `bias` causal mask in paddle.get_default_dtype() (float32) and calls
    paddle.where(causal_mask, ...): ValueError on Paddle 3, on any input. Fails (xpass) the day it runs."""
    _paddle_forward("gptj", "expected to be a boolean Tensor")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="a difference of paddlenlp 2.8.1's port "
                   "(docs/zoo.md, What the zoo finds in the ports): RemBertAttention hands a tuple to a Linear")
def test_paddlenlp_rembert_forward_runs():
    """paddlenlp's RemBertSelfAttention returns (context, attention_probs); RemBertAttention passes that tuple on to
    RemBertSelfOutput, whose dense Linear raises `linear(): argument 'X' (position 0) must be Tensor, but got
    tuple`, on any input and any Paddle. Fails (xpass) the day RemBertModel's forward runs."""
    _paddle_forward("rembert", "must be Tensor, but got tuple")


def test_every_finding_of_a_family_names_its_strict_xfail_test_and_its_section_entry():
    """A row saying `not the same model` rests on a test that stays red until the library changes, and on the
    entry of docs/zoo.md's What the zoo finds in the ports that says the figures (and its Chinese twin)."""
    import re
    from pathlib import Path
    from tools.zoo import families
    here = Path(__file__).resolve()
    source = "".join((here.parent / name).read_text(encoding="utf-8")
                     for name in (here.name, "test_zoo_reasons.py", "test_zoo_families.py"))
    found = {}
    for page in ("zoo.md", "zoo_cn.md"):
        text = (here.parents[1] / "docs" / page).read_text(encoding="utf-8")
        found[page] = text
    for family, said in families.REASONS.items():
        named = re.search(r"\((test_\w+)\)$", said)
        if named is None:  # a reason a plain test of tests/test_zoo_reasons.py holds (a pooler only one side has)
            continue
        test = named.group(1)
        assert re.search(r"@pytest\.mark\.xfail\(strict=True[^@]*?def " + test + r"\(", source, re.S), test
        assert all(f"`{test}`" in text for text in found.values()), test


def test_both_pages_are_the_tools_rendering_of_the_recorded_runs():
    """docs/zoo.md (the user's) and docs/bench/zoo.md (the figures) are what `python -m tools.zoo.run --page` writes
    from docs/bench/zoo.json and zoo_families.json: their prose is edited in tools/zoo/page.py, never on a page."""
    from tools.zoo import page, recorded
    guide, bench = page.render()
    assert guide == recorded.GUIDE.read_text(encoding="utf-8")
    assert bench == recorded.BENCH.read_text(encoding="utf-8")


def test_every_verdict_a_family_has_is_read_on_the_users_page_and_its_figures_are_not():
    """Each family's verdict in the recorded run is one the user's page says how to read; the seconds and what the
    library said per rule live on the benchmark page alone."""
    from tools import bench_doc
    from tools.zoo import families, page, recorded, tables
    held = page.load(recorded.BENCH.parent)
    assert tables.unread(held["families"]["results"]) == []
    assert tables.unread([{"outcome": "needs a GPU: its attention is a CUDA kernel"}]) == ["needs a GPU"]
    guide, bench = page.render()
    bert = next(r for r in held["families"]["results"] if r["family"] == "bert")
    said = tables.cell(families.cells(bert)[3])  # its forward, backward and plants, where each was red
    assert f"| bert | {bert['seconds']} |" in bench and said in bench and said not in guide
    assert "## Per rule" in bench and "## Per rule" not in guide
    assert recorded.facts("tools.zoo.run", [str(recorded.ROOT / "tools" / "zoo" / "run.py")])["command"] == \
        bench_doc.setting(recorded.KERNEL_VARIABLES) + "python -m tools.zoo.run"


def test_the_chinese_page_says_the_recorded_runs_verdicts():
    """docs/zoo_cn.md is kept by hand: its tables of cases and families by verdict hold the numbers and the families
    of the recorded runs, as docs/zoo.md's rendering does, and it says the runs' seconds."""
    import re
    from tools.zoo import page, recorded, tables
    held = page.load(recorded.BENCH.parent)
    text = (recorded.GUIDE.parent / "zoo_cn.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip().partition("（")[0]: line for line in text.splitlines() if line.startswith("| ")}
    numbers = lambda line: re.findall(r"\d+", line)
    for group, *counts in page.case_groups(held["cases"]["results"]):
        assert numbers(rows.get(group, "")) == numbers(" ".join(map(str, counts))), group
    verdicts = {}
    for r in held["families"]["results"]:
        verdicts.setdefault(tables.kind(r["outcome"]), set()).add(r["family"])
    for verdict, names in verdicts.items():
        assert set(re.findall(r"`(\w+)`", rows.get(verdict, ""))) == names, verdict
        assert f"| {verdict} | {len(names)} |" in rows[verdict]
    assert f"{held['cases']['seconds']} 秒" in text and f"{held['families']['seconds']} 秒" in text


def test_both_pages_say_the_run_under_another_cpus_kernels():
    """docs/zoo.md's section on the zoo under torch's scalar kernels is page.py's from docs/bench/zoo_kernels.json
    (test_both_pages_are_the_tools_rendering_of_the_recorded_runs holds it); docs/zoo_cn.md, kept by hand, says its
    verdicts, how many differ, and each correct port green there by the rules made for rounding."""
    import json
    from tools.zoo import recorded
    held = json.loads((recorded.BENCH.parent / recorded.KERNELS_JSON).read_text(encoding="utf-8"))
    for name, heading, said in (("zoo.md", "## Under another CPU's kernels", f"{held['verdicts']} verdicts"),
                                ("zoo_cn.md", "## 在另一种 CPU 的内核下", f"{held['verdicts']} 个判定")):
        text = (recorded.GUIDE.parent / name).read_text(encoding="utf-8")
        section = " ".join(text[text.index(heading):].split("\n## ")[0].split())
        assert said in section and all(p["case"] in section for p in held["ports"]), name
        assert ("没有一个与表中不同" in section or "none of its" in section) == (not held["differing"]), name


def test_a_families_run_records_its_facts_and_says_which_rows_it_judged(tmp_path, monkeypatch):
    """`python -m tools.zoo.families --only bert --write` keeps the other rows as they were: the benchmark page says
    the facts of the run that judged bert, and that those of the rows from before were not recorded."""
    import shutil
    from tools import bench_doc
    from tools.zoo import families, page, recorded
    for name in recorded.JSONS:
        shutil.copy(recorded.BENCH.parent / name, tmp_path / name)
    before = json.loads((tmp_path / recorded.FAMILIES_JSON).read_text())  # rows judged before facts were recorded
    before[bench_doc.RUN] = []
    for r in before["results"]:
        r.pop("measured", None)
    (tmp_path / recorded.FAMILIES_JSON).write_text(json.dumps(before))
    monkeypatch.setattr(recorded, "BENCH", tmp_path / "zoo.md")
    monkeypatch.setattr(recorded, "GUIDE", tmp_path / "guide.md")
    held = page.load(tmp_path)["families"]["results"]
    bert = next(r for r in held if r["family"] == "bert")
    run = bench_doc.finish(recorded.facts("tools.zoo.families", ["tools/zoo/families.py", "--only", "bert",
                                                                 "--write"]))
    families.write([bert], bert["seconds"], run)
    page.write()  # what families.pages() has the page's own command do
    header = (tmp_path / "zoo.md").read_text(encoding="utf-8").splitlines()[2]
    said = bench_doc.header(run, recorded.FAMILIES_COMMAND)
    assert said in header and f"on {run['date']} (UTC)" in said and "--only bert --write" in said
    assert bench_doc.header({}, recorded.FAMILIES_COMMAND) in header  # the 50 rows before: not recorded, said so
    # the user's page: the same verdicts, no facts of a run on it
    assert (tmp_path / "guide.md").read_text(encoding="utf-8") == \
        (recorded.ROOT / "docs" / "zoo.md").read_text("utf-8")


def test_the_families_command_writes_the_pages_by_the_pages_own_command(monkeypatch):
    """The families never import the page (it reads them): their command has `python -m tools.zoo.run --page` write
    both pages once the run is recorded, and a page that could not be written is one line."""
    import subprocess
    import sys
    from portcheck.core.errors import PipelineError
    from tools.zoo import families, recorded
    ran = []
    monkeypatch.setattr(families.subprocess, "run", lambda command, **kw: ran.append((command, kw)) or
                        subprocess.CompletedProcess(command, 0 if len(ran) == 1 else 1))
    families.pages()
    assert ran == [([sys.executable, "-m", "tools.zoo.run", "--page"], {"cwd": recorded.ROOT})]
    with pytest.raises(PipelineError, match=r"^`python -m tools.zoo.run --page` exited with 1: the run is recorded"):
        families.pages()
