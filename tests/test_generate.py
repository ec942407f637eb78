"""compare_generate on a tiny Llama pair (transformers against paddlenlp, weights by portcheck.convert): the clean
port green at every step and against itself; each plant only generation shows red at its step, and at its module
where the model's call holds it (a plant of the loop's own: the call within its rule, said so)."""
import contextlib
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import check_cache, compare_generate, convert  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402
from portcheck.generation.feeding import OwnStep, plain_step  # noqa: E402
from test_docs_blocks import DOCS, printed_as_said, python_blocks, run_in_process  # noqa: E402

LLAMA = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0)
IDS = np.random.RandomState(0).randint(1, 128, (1, 5)).astype("int64")
STEPS = 4


@pytest.fixture(scope="module")
def pair():
    from paddlenlp.transformers import LlamaConfig as PaddleConfig, LlamaForCausalLM as PaddleLlama
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    pt = LlamaForCausalLM(LlamaConfig(**LLAMA, attn_implementation="eager")).eval()
    pd = PaddleLlama(PaddleConfig(**LLAMA)).eval()
    pd.set_state_dict(convert(pt, pd, layouts={"LlamaLMHead": "transpose"}, inputs={"input_ids": IDS}))
    return pt, pd


@contextlib.contextmanager
def patched(layer, wrap):
    """layer.forward replaced by wrap(its forward) for the block (object's setattr: paddlenlp shims a function
    set as forward)."""
    original = layer.forward
    object.__setattr__(layer, "forward", wrap(original))
    try:
        yield
    finally:
        object.__delattr__(layer, "forward")


def test_the_clean_port_is_green_at_every_step_and_each_side_against_itself(pair):
    report = compare_generate(*pair, IDS, max_new_tokens=STEPS)
    assert report.passed and report.first_step is None and report.first_diverging is None, report.table()
    assert [s.step for s in report.steps] == [1, 2, 3, 4] and [s.position for s in report.steps] == [4, 5, 6, 7]
    assert all(len(s.cache) == 4 and s.choices == [] for s in report.steps)  # 2 layers' keys and values
    assert report.tokens["paddle"] == report.tokens["fed"]
    assert report.own["torch"].passed and report.own["paddle"].passed
    assert report.lines()[0] == "compare_generate: green, 4 steps within the measured rule"


def test_positions_restarting_at_0_with_a_cache_are_red_at_step_2_in_the_first_attention(pair):
    """paddlenlp's own Llama, given no positions with a cache, starts them at 0 (transformers continues): the
    library feeds positions, so the clean port is green; a port that drops them is red where they are used."""
    pt, pd = pair

    def restart(forward):
        def run(*args, **kwargs):
            if kwargs.get("past_key_values") is not None:
                kwargs["position_ids"] = None
            return forward(*args, **kwargs)
        return run
    with patched(pd.llama, restart):
        report = compare_generate(pt, pd, IDS, max_new_tokens=3)
    assert report.first_step == 2 and report.steps[0].passed, report.table()
    assert report.first_diverging.startswith("model.layers.0.self_attn"), report.table()
    assert report.first_diverging.paddle.startswith("llama.layers.0.self_attn")
    assert report.own["paddle"].first_step == 2 and report.own["torch"].passed
    assert "a bug of the paddle side's cached decoding" in "\n".join(report.lines())
    # a loop of one's own calling each model directly, no positions handed: paddlenlp's Llama restarts them at 0
    unfed = compare_generate(pt, pd, IDS, max_new_tokens=3, position_ids=False, against_itself=False,
                             step=plain_step)
    assert unfed.first_step == 2 and unfed.first_diverging.startswith("model.layers.0.self_attn")
    assert any("paddlenlp's Llama does" in n for n in unfed.notes)


def test_keys_and_values_swapped_in_the_cache_are_red_at_step_1s_cache(pair):
    pt, pd = pair

    def swap(forward):
        def run(*args, **kwargs):
            out = forward(*args, **kwargs)
            return (*out[:-1], out[-1][::-1]) if isinstance(out, tuple) and isinstance(out[-1], tuple) else out
        return run
    with contextlib.ExitStack() as stack:
        for layer in pd.llama.layers:
            stack.enter_context(patched(layer.self_attn, swap))
        report = compare_generate(pt, pd, IDS, max_new_tokens=3)
    first = report.steps[0]
    assert report.first_step == 1 and first.logits.passed and first.first_red.name == "step 1: layer 0 keys"
    assert report.first_diverging.startswith("(model):past_key_values[0]"), report.table()
    assert not report.steps[1].logits.passed  # the next step reads the swapped cache
    assert report.own["paddle"].first_step == 2 and report.own["torch"].passed


PADDED = np.where(np.arange(5) < 2, 0, np.random.RandomState(1).randint(1, 128, (2, 5))).astype("int64")
PADDED[1] = IDS[0]
MASK = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])


def test_a_batch_of_prompts_left_padded_is_green_and_its_padding_mask_dropped_with_a_cache_red(pair):
    """Two prompts, the first left-padded: the clean port green; a port that drops the padding mask once a cache is
    given attends to the padding from step 2, in the first attention."""
    pt, pd = pair
    assert compare_generate(pt, pd, PADDED, max_new_tokens=3, attention_mask=MASK).passed

    def unmasked(forward):
        def run(*args, **kwargs):
            if kwargs.get("past_key_values") is not None:
                kwargs["attention_mask"] = None
            return forward(*args, **kwargs)
        return run
    with patched(pd.llama, unmasked):
        report = compare_generate(pt, pd, PADDED, max_new_tokens=3, attention_mask=MASK)
    assert report.first_step == 2 and report.first_diverging.startswith("model.layers.0.self_attn"), report.table()
    assert report.own["paddle"].first_step == 2 and report.own["torch"].passed


def test_a_cache_concatenated_on_the_wrong_axis_is_red_at_step_2_where_it_raised(pair):
    """The past keys and values read in torch's layout [batch, heads, length, dim] by paddlenlp's attention, which
    joins them to the new ones on its length axis: a step that raises, named at its module."""
    pt, pd = pair

    def torch_layout(forward):
        def run(*args, **kwargs):
            if len(args) > 2 and args[2] is not None:  # its decoder layer hands the cache third, by position
                args = (*args[:2], tuple(t.transpose([0, 2, 1, 3]) for t in args[2]), *args[3:])
            return forward(*args, **kwargs)
        return run
    with contextlib.ExitStack() as stack:
        for layer in pd.llama.layers:
            stack.enter_context(patched(layer.self_attn, torch_layout))
        report = compare_generate(pt, pd, IDS, max_new_tokens=3)
    assert report.first_step == 2 and report.steps[1].raised_in == {"paddle": "llama.layers.0.self_attn"}
    assert "the paddle step raised in llama.layers.0.self_attn" in report.headline() and "[PC660]" in report.headline()
    assert report.steps[1].line().endswith("[PC655]") and not report.own["paddle"].passed


@pytest.mark.parametrize("plant", ["logits taken at the first position", "temperature 0.7", "repetition penalty",
                                   "EOS held back (min_new_tokens)", "pad never chosen"])
def test_a_loop_of_ones_own_planted_on_one_side_is_red_at_step_1_its_models_call_green(pair, plant):
    own = OwnStep()  # the library's own step, a processor after it

    def paddle_step(model, input_ids, past_key_values, **kwargs):
        if plant.startswith("logits"):
            kwargs = {k: v for k, v in kwargs.items() if v is not None}
            out = model(input_ids=input_ids, past_key_values=past_key_values, use_cache=True, return_dict=True,
                        **kwargs)
            return out.logits[:, 0], out.past_key_values
        logits, past = own(model, input_ids, past_key_values, **kwargs)
        if plant.startswith("temperature"):
            return logits / 0.7, past
        if plant.startswith(("EOS", "pad")):  # as a logits processor does it, on this side only: -inf at that id
            barred = np.arange(logits.shape[-1]) == (model.config.eos_token_id if plant.startswith("EOS")
                                                     else model.config.pad_token_id)
            return paddle.where(paddle.to_tensor(barred[None]), paddle.full_like(logits, -np.inf), logits), past
        seen = paddle.to_tensor(np.isin(np.arange(logits.shape[-1]), IDS)[None])  # the prompt's tokens, penalised
        return paddle.where(seen, paddle.where(logits > 0, logits / 1.2, logits * 1.2), logits), past
    report = compare_generate(*pair, IDS, max_new_tokens=2, step=(None, paddle_step), against_itself=False)
    assert report.first_step == 1 and report.first_diverging is None, report.table()
    assert report.step_report is not None and report.call_held
    assert "the step's own handling differs" in report.headline()


def test_each_side_alone_finds_a_cache_bug_as_its_own(pair):
    pt, pd = pair
    assert check_cache(pt, IDS, max_new_tokens=3).passed

    def restart(forward):
        def run(*args, **kwargs):
            if kwargs.get("past_key_values") is not None:
                kwargs["position_ids"] = None
            return forward(*args, **kwargs)
        return run
    with patched(pd.llama, restart):
        alone = check_cache(pd, IDS, max_new_tokens=3)
    assert alone.first_step == 2 and alone.yardstick == "the Paddle model in float64", alone.lines()
    assert alone.lines()[0].startswith("paddle against itself: RED, a bug of the paddle side's cached decoding")


@pytest.mark.parametrize("args, code", [
    (dict(input_ids=np.ones((1, 2, 3), "int64")), "PC651"), (dict(input_ids=np.ones((1, 3))), "PC651"),
    (dict(max_new_tokens=0), "PC652"), (dict(max_new_tokens=True), "PC652"),
    (dict(attention_mask=np.array([[1, 1, 1, 1, 0]])), "PC653"), (dict(step=(None,)), "PC654"),
])
def test_arguments_a_caller_gets_wrong_are_one_line_each(pair, args, code):
    with pytest.raises(PipelineError, match=code):
        compare_generate(*pair, **{"input_ids": IDS, "max_new_tokens": 2, **args})


def test_a_step_returning_logits_of_another_shape_is_one_line(pair):
    def whole(model, input_ids, past_key_values, **kwargs):
        out = model(input_ids=input_ids, past_key_values=past_key_values, use_cache=True)
        return out.logits, out.past_key_values
    with pytest.raises(PipelineError, match=r"logits of shape \[1, 5, 128\].*PC650"):
        compare_generate(*pair, IDS, max_new_tokens=2, step=(whole, None))


def test_each_librarys_own_generate_is_compared_call_by_call(pair):
    """transformers' generate(do_sample=False) against paddlenlp's generate(decode_strategy="greedy_search"), each
    model call a step: green on one prompt; on a left-padded batch paddlenlp's counts positions from the padding
    (transformers' from the first real token): every logit agrees, the cached keys differ by their rotation, and the
    report says the two number positions from another origin."""
    pt, pd = pair
    report = compare_generate(pt, pd, IDS, max_new_tokens=3, step="generate", against_itself=False)
    assert report.passed and len(report.steps) == 3 and report.own == {}, report.table()
    padded = compare_generate(pt, pd, PADDED, max_new_tokens=2, attention_mask=MASK, step="generate",
                              against_itself=False)
    assert padded.passed, padded.table()
    assert any(n.startswith("positions: paddle numbers them from the sequence's start, the padding included, torch "
                            "from the first real token: another origin") for n in padded.notes), padded.notes


def test_the_pages_programs_run_alone_and_print_what_the_page_says(tmp_path):
    """docs/generation.md's two programs (the clean pair, and a loop passing no positions), each in an empty folder
    with fresh globals, in this process (it imports transformers and paddlenlp already)."""
    programs = python_blocks(DOCS / "generation.md")
    assert len(programs) == 2
    for (status, output), (_, said) in zip(run_in_process([code for code, _ in programs], tmp_path), programs):
        assert status == 0 and said and not printed_as_said(output, said), (printed_as_said(output, said), output)


def test_the_command_line_decodes_two_checkpoint_folders_one_line_per_step(tmp_path, capsys):
    from examples.tiny_llama import write_pair
    from portcheck import cli
    torch_dir, paddle_dir = write_pair(tmp_path)
    np.save(tmp_path / "prompt.npy", IDS[0] % 64)
    argv = ["generate", "--torch", str(torch_dir), "--paddle", str(paddle_dir), "--prompt-ids",
            str(tmp_path / "prompt.npy"), "--new-tokens", "2"]
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    out = capsys.readouterr().out.splitlines()
    assert done.value.code == 0 and out[0] == "compare_generate: green, 2 steps within the measured rule", out
    assert out[1].startswith("step 1 (position 4): logits max diff") and "12 cached tensors" in out[1]
    np.save(tmp_path / "floats.npy", np.ones((1, 3)))
    with pytest.raises(SystemExit) as done:
        cli.main(argv[:6] + [str(tmp_path / "floats.npy")])
    assert done.value.code == 2 and "[PC663]" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        cli.main(argv[:-1] + ["0"])
    assert done.value.code == 2 and "[PC664]" in capsys.readouterr().err
    config = json.loads((paddle_dir / "config.json").read_text())
    (paddle_dir / "config.json").write_text(json.dumps({**config, "rope_theta": 500000.0}))  # the port's rotary base
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    out = capsys.readouterr().out.splitlines()
    assert done.value.code == 1 and out[0].startswith("compare_generate: RED, the two part at step 1"), out
    assert "llama.layers.0.self_attn" in out[0]


def test_a_differing_choice_within_the_allowance_is_a_tie_and_beyond_it_a_differing_choice():
    """Two tokens torch's logits hold one rounding apart, Paddle's the other way round: the logits within their rule, the
    choice said as a tie; logits a whole unit apart, a differing choice (red)."""
    from portcheck.forward.judging import judge_one
    from portcheck.generation.steps import choices
    from portcheck.generation.verdict import Step
    up = float(np.nextafter(np.float32(1.0), np.float32(2.0)))  # one float32 rounding above 1
    a = np.array([[0.5, 1.0, up]], np.float32)
    b = np.array([[0.5, up, 1.0]], np.float32)
    row = judge_one("step 1: logits", a, a.astype(np.float64) + 5e-8, b)
    tie = choices(a, b, row)
    assert row.passed and [(c.torch, c.paddle, c.tie) for c in tie] == [(2, 1, True)]
    step = Step(1, 4, [2], logits=row, choices=tie)
    assert step.passed and "torch chose 2, paddle 1: a tie, not a bug" in step.line()
    far = np.array([[0.5, 3.0, 1.0]], np.float32)
    red = judge_one("step 1: logits", a, a.astype(np.float64), far)
    apart = choices(a, far, red)
    assert [(c.torch, c.paddle, c.tie) for c in apart] == [(2, 1, False)]
    assert not Step(1, 4, [2], logits=red, choices=apart).passed


def test_the_report_is_a_page(pair, tmp_path):
    report = compare_generate(*pair, IDS, max_new_tokens=2, against_itself=False)
    said = report.html(tmp_path / "generate.html")
    assert (tmp_path / "generate.html").is_file() and "generate.html" in said
    assert report.view()["headline"] == report.headline() and report.view()["passed"] is True


def test_a_preparations_own_float32_tensor_meets_the_float64_twin_in_its_dtype():
    """A model's preparation that makes a floating tensor of a fixed dtype (XLNet's perm_mask, dtype=torch.float):
    torch's float64 twin, the yardstick, is handed it in float64 and runs; the float32 run is handed it unchanged."""
    from portcheck.forward.twin import float64
    from portcheck.generation.feeding import called

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(3, 3)

        def prepare_inputs_for_generation(self, input_ids, **kwargs):
            return {"x": torch.ones(input_ids.shape[0], 3, dtype=torch.float)}

        def forward(self, x, return_dict=True):
            return torch.einsum("bi,oi->bo", x, self.proj.weight)  # einsum, as XLNet's: no dtype promotion

    model = Scaled()
    ids = torch.zeros(2, 1, dtype=torch.int64)
    assert called(model, ids, {}).dtype == torch.float32
    with float64(model):
        assert called(model, ids, {}).dtype == torch.float64


def test_positions_that_differ_at_the_left_padding_alone_are_not_arguments_handed_otherwise():
    """transformers numbers a padded position 0, paddleformers 1: no real token reads it. Positions that differ at a
    real token are still said."""
    from types import SimpleNamespace

    from portcheck.generation.steps import handed_otherwise
    mask = np.array([[0, 0, 1, 1], [1, 1, 1, 1]])
    call = lambda positions: SimpleNamespace(kwargs={"attention_mask": mask, "position_ids": np.array(positions)})
    torch_call = call([[0, 0, 0, 1], [0, 1, 2, 3]])
    assert handed_otherwise(torch_call, call([[1, 1, 0, 1], [0, 1, 2, 3]])) == []
    assert handed_otherwise(torch_call, call([[1, 1, 1, 2], [0, 1, 2, 3]])) == ["position_ids"]


def test_an_encoder_that_is_no_module_is_one_line():
    """A seq2seq model written by hand whose get_encoder returns its encode method: its encoder output cannot be
    watched, said in one line naming what to return."""
    from types import SimpleNamespace

    from portcheck.generation.decode import Decoded, encoder_seen

    class HandWritten(torch.nn.Module):
        config = SimpleNamespace(is_encoder_decoder=True, decoder_start_token_id=1)

        def get_encoder(self):
            return self.encode

        def encode(self, ids):
            return ids

    with pytest.raises(PipelineError, match=r"HandWritten.get_encoder\(\) returned a method, not a module.*PC671"):
        with encoder_seen(HandWritten(), Decoded("torch")):
            pass


def test_a_call_made_by_place_is_handed_the_prompt_by_its_own_names():
    """A seq2seq model written by hand, called model(ids, decoder_ids, past, mask): the parting step's call made
    again with the prompt in place of the encoder's output names each argument by the forward's signature, so the
    prompt replaces its own input_ids rather than colliding with it."""
    from types import SimpleNamespace

    from portcheck.generation.decode import Call
    from portcheck.generation.generate import with_encoder_run

    class HandWritten(torch.nn.Module):
        def forward(self, input_ids, decoder_input_ids, past=None, attention_mask=None):
            return decoder_input_ids

    prompt, mask = np.array([[4, 5, 6]]), np.array([[0, 1, 1]])
    call = Call((np.array([[9, 9, 9]]), np.array([[1]]), None, np.ones((1, 3))), {})
    again = with_encoder_run(call, SimpleNamespace(prompt=prompt, mask=mask), HandWritten())
    assert again.args == () and sorted(again.kwargs) == ["attention_mask", "decoder_input_ids", "input_ids", "past"]
    assert again.kwargs["input_ids"] is prompt and again.kwargs["attention_mask"] is mask
