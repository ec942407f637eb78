"""compare_backward(isolate=True) on a fused q/k/v (one Linear on Paddle's side, three on torch's): each step's
restart sets Paddle's fused tensor joined from torch's parts as convert joins it (mapping.fused.joined_state), so
every step starts from torch's weights. Without the join, Paddle only warned "Skip loading for qkv.weight", the fused
tensor trained on from Paddle's own last step and a correct port was red at key.weight after step 2 (Adam, 2 x 5 x
16). A Paddle tensor a restart leaves unset that moved is refused (PC495), a start key Paddle does not hold too
(PC496)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import Fused, compare_backward, compare_forward, convert  # noqa: E402
from portcheck.mapping import recipes  # noqa: E402
from portcheck.core.errors import PipelineError  # noqa: E402
from portcheck.gradients import restarts  # noqa: E402
from portcheck.mapping import fused  # noqa: E402

D = 16
LAYOUTS = {"qkv": Fused(("q", "k", "v"))}
X = np.random.RandomState(0).randn(2, 5, D).astype(np.float32)
Y = np.array([1, 3])
LOSS = (torch.nn.functional.cross_entropy, paddle.nn.functional.cross_entropy)
ADAM = (lambda ps: torch.optim.Adam(ps, 0.01), lambda ps: paddle.optimizer.Adam(0.01, parameters=ps))


class Separate(torch.nn.Module):
    """Attention with q, k and v in Linears of their own (BERT's query, key, value)."""
    def __init__(self):
        super().__init__()
        self.query, self.key, self.value = (torch.nn.Linear(D, D) for _ in range(3))
        self.out = torch.nn.Linear(D, 4)

    def forward(self, x):
        q, k, v = self.query(x), self.key(x), self.value(x)
        return self.out(torch.softmax(q @ k.transpose(-1, -2) / D ** 0.5, -1) @ v).mean(1)


class Joined(paddle.nn.Layer):
    """The same with q, k and v in one Linear, [q | k | v]; swap: its forward reads k and v the other way round."""
    def __init__(self, swap=False):
        super().__init__()
        self.qkv, self.out, self.swap = paddle.nn.Linear(D, 3 * D), paddle.nn.Linear(D, 4), swap

    def forward(self, x):
        q, k, v = paddle.chunk(self.qkv(x), 3, axis=-1)
        if self.swap:
            k, v = v, k
        scores = paddle.nn.functional.softmax(q @ k.transpose([0, 2, 1]) / D ** 0.5, -1)
        return self.out(scores @ v).mean(1)


def pair(swap=False):
    torch.manual_seed(0)
    pt, pd = Separate(), Joined(swap)
    convert(pt, pd, inputs=X, layouts=LAYOUTS)
    return pt, pd


def trained(pt, pd, steps=3):
    return compare_backward(pt, pd, X, Y, LOSS, ADAM, steps=steps, layouts=LAYOUTS, isolate=True)


def test_a_correct_fused_port_is_green_over_isolated_steps():
    report = trained(*pair())
    assert report.passed, report.table()
    assert report.isolated and {"query.weight", "key.weight", "value.bias"} <= {r.name for r in report.steps[2]}


def test_each_restart_joins_the_parts_as_convert_does():
    pt, pd = pair()
    state = convert(pt, pd, inputs=X, layouts=LAYOUTS)
    parts = {f"qkv.{p}.{t}": getattr(getattr(pt, name), t).detach().numpy().T.copy() if t == "weight" else
             getattr(getattr(pt, name), t).detach().numpy().copy()
             for p, name in zip("qkv", ("query", "key", "value")) for t in ("weight", "bias")}
    joined = fused.joined_state(parts, fused.specs(pd, LAYOUTS))
    assert set(joined) == {"qkv.weight", "qkv.bias"}
    assert all(np.array_equal(joined[k], state[k]) for k in joined)
    restart = restarts.restart(pd, {1: {**joined, "out.weight": state["out.weight"], "out.bias": state["out.bias"]}})
    pd.qkv.weight.set_value(np.zeros((D, 3 * D), np.float32))
    restart(pd, 1)
    assert np.array_equal(pd.qkv.weight.numpy(), state["qkv.weight"])


def test_a_wrong_lr_on_the_fused_tensor_is_red_at_its_part_in_every_step():
    pt, pd = pair()
    pd.qkv.weight.optimize_attr["learning_rate"] = 2.0  # the planted bug: one parameter's lr doubled
    report = trained(pt, pd)
    assert not report.passed and report.first_diverging == "query.weight after step 1", report.table()
    assert all(report.first_in_step(i).name == "query.weight" for i in range(3)), report.table()
    assert all(r.passed for r in report.grads)


def test_k_and_v_read_the_other_way_round_are_red_in_the_first_forward():
    report = trained(*pair(swap=True))
    assert not report.passed and not report.forward.passed, report.table()
    # the root's own forward reads k and v the other way round: its computation before out
    assert report.first_diverging == "(model) (before out)", report.table()


def test_a_tensor_no_restart_sets_that_moved_is_refused():
    pt, pd = pair()
    state = convert(pt, pd, inputs=X, layouts=LAYOUTS)
    restart = restarts.restart(pd, {1: {"out.weight": state["out.weight"], "out.bias": state["out.bias"]}})
    restart(pd, 1)  # qkv unset and unmoved: its value is the one convert set
    pd.qkv.weight.set_value(pd.qkv.weight.numpy() + 1e-3)  # a step moved it
    with pytest.raises(PipelineError, match=r"Paddle's qkv\.weight moved in step 1 and no torch tensor restarts it, "
                                            r"so step 2 would start it from Paddle's own weights .*\[PC495\]"):
        restart(pd, 1)


def test_a_start_holding_parts_paddle_does_not_hold_is_refused_before_any_step():
    pt, pd = pair()
    parts = {f"qkv.{p}.bias": np.zeros(D, np.float32) for p in "qkv"}
    with pytest.raises(PipelineError, match=r"holds qkv\.k\.bias \(no Paddle key\), qkv\.q\.bias \(no Paddle key\), "
                                            r"qkv\.v\.bias \(no Paddle key\), which the Paddle model does not hold so"
                                            r".*\[PC496\]"):
        restarts.restart(pd, {1: parts})
    with pytest.raises(PipelineError, match=r"holds qkv\.bias \[16\] vs Paddle \[48\], which.*\[PC496\]"):
        restarts.restart(pd, {1: {"qkv.bias": np.zeros(D, np.float32)}})


def test_paddlenlps_fused_llama_is_green_over_isolated_steps():
    """paddlenlp's Llama with fuse_attention_qkv (its qkv_proj per key-value head) and fuse_attention_ffn against
    transformers' separate projections: red at layers.0.self_attn.k_proj.weight after step 3 without the join."""
    pytest.importorskip("paddlenlp")
    from paddlenlp.transformers import LlamaConfig as PaddleConfig, LlamaForCausalLM as PaddleLlama
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    paddle.seed(0)
    sizes = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=4, max_position_embeddings=64, use_cache=False, rms_norm_eps=1e-6)
    pt = LlamaForCausalLM(LlamaConfig(**sizes, attn_implementation="eager"))
    pd = PaddleLlama(PaddleConfig(**sizes, fuse_attention_qkv=True, fuse_attention_ffn=True))
    layouts = recipes.paddlenlp_llama(fused_qkv=True, fused_ffn=True, num_attention_heads=4, num_key_value_heads=4)
    assert layouts == {"LlamaLMHead": "transpose", "qkv_proj": Fused(("q_proj", "k_proj", "v_proj"), heads=4),
                       "gate_up_fused_proj": Fused(("gate_proj", "up_proj"))}
    ids = np.random.RandomState(0).randint(0, 64, (2, 8)).astype(np.int64)
    convert(pt.eval(), pd.eval(), inputs=ids, layouts=layouts)
    logits = lambda o: o[0] if isinstance(o, (tuple, list)) else o.logits if hasattr(o, "logits") else o
    loss = lambda o, y: ((logits(o) - y) ** 2).mean()
    target = np.random.RandomState(1).randn(2, 8, 64).astype(np.float32)
    report = compare_backward(pt, pd, ids, target, (loss, loss), (
        lambda ps: torch.optim.Adam(ps, 1e-3), lambda ps: paddle.optimizer.Adam(1e-3, parameters=ps)), steps=3,
        layouts=layouts, isolate=True)
    assert report.passed, report.table()
    assert "model.layers.0.self_attn.k_proj.weight" in {r.name for r in report.steps[2]}


def test_the_paddlenlp_llama_recipe_goes_per_key_value_group_where_a_group_holds_several_query_heads():
    """paddlenlp's fused qkv_proj with grouped-query attention (4 query heads, 2 key-value heads): the recipe's layout,
    [q of the group's 2 heads | k | v] per group, is green; the parts one after the other ([q | k | v]) red at the
    attention."""
    pytest.importorskip("paddlenlp")
    from paddlenlp.transformers import LlamaConfig as PaddleConfig, LlamaModel as PaddleLlama
    from transformers import LlamaConfig, LlamaModel
    torch.manual_seed(0)
    sizes = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=64, use_cache=False, rms_norm_eps=1e-6)
    pt = LlamaModel(LlamaConfig(**sizes, attn_implementation="eager")).eval()
    pd = PaddleLlama(PaddleConfig(**sizes, fuse_attention_qkv=True))
    pd.eval()
    ids = np.random.RandomState(0).randint(0, 64, (2, 8)).astype(np.int64)
    layouts = recipes.paddlenlp_llama(fused_qkv=True, num_attention_heads=4, num_key_value_heads=2)
    pd.set_state_dict(convert(pt, pd, layouts=layouts, inputs=ids))
    assert compare_forward(pt, pd, ids, layouts=layouts).passed
    wrong = {"qkv_proj": Fused(("q_proj", "k_proj", "v_proj"), widths=(2, 1, 1))}   # [q | k | v], not per group
    pd.set_state_dict(convert(pt, pd, layouts=wrong, inputs=ids))
    report = compare_forward(pt, pd, ids, layouts=wrong)
    assert not report.passed and "self_attn" in str(report.first_diverging), report.first_diverging
    with pytest.raises(ValueError, match="num_key_value_heads"):
        recipes.paddlenlp_llama(fused_qkv=True)
