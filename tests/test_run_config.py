"""`python -m portcheck run`'s configuration beyond the modules' settings (issue 61, items 4, 6-8): every loss class
and functional of both frameworks recorded in torch's conventions, a loss portcheck does not know said so; a dropout
given as a number; padding_idx judged by what the steps measure; tensors one side alone holds; a head tied to the
embedding. Pairs of scripts written as users write them (argparse, a plain loop, no portcheck); each torch side runs
once, each plant is the Paddle side alone against it (run.run_side, run.judge: what `run` does after the scripts)."""
import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from portcheck.scripts import run, runconfig, judge_run
from portcheck.core.errors import PipelineError

STEPS = 3

# a tiny language model: its loss a loss class (Paddle's computes with its own kernels), an Embedding with
# padding_idx, attention with its own dropout (torch's a module of the
# user's calling scaled_dot_product_attention; Paddle's nn.MultiHeadAttention, its dropout a float), the head tied
# to the embedding (torch: head.weight = emb.weight; Paddle: matmul with emb.weight), pads masked and ignored
LM = {"torch": '''import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, t, d = x.shape
        split = lambda y: y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        keep = mask[:, None, None, :] > 0
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=self.dropout if self.training else 0.0)
        return self.out_proj(o.transpose(1, 2).reshape(b, t, d))


class TinyLM(nn.Module):
    def __init__(self, vocab, dim, heads, dropout):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.attn = Attention(dim, heads, dropout)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids, mask):
        h = self.emb(ids)
        h = h + self.attn(h, mask)
        return self.head(h)


parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-2)
args = parser.parse_args()
torch.manual_seed(0)
vocab = 11
model = TinyLM(vocab, 8, 2, 0.1)
opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
loss_fn = nn.CrossEntropyLoss(ignore_index=0)
rng = np.random.default_rng(0)
for step in range(5):
    ids = rng.integers(1, vocab, (4, 6))
    mask = (np.arange(6)[None] < rng.integers(3, 7, 4)[:, None]).astype("int64")
    ids = ids * mask  # 0 is the pad token
    labels = np.where(mask > 0, np.roll(ids, -1, axis=1), 0)
    logits = model(torch.from_numpy(ids), torch.from_numpy(mask))
    loss = loss_fn(logits.reshape(-1, vocab), torch.from_numpy(labels).reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
''', "paddle": '''import argparse

import numpy as np
import paddle
from paddle import nn


class TinyLM(nn.Layer):
    def __init__(self, vocab, dim, heads, dropout):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.attn = nn.MultiHeadAttention(dim, heads, dropout=dropout)

    def forward(self, ids, mask):
        h = self.emb(ids)
        h = h + self.attn(h, h, h, attn_mask=mask[:, None, None, :] > 0)
        return paddle.matmul(h, self.emb.weight, transpose_y=True)


parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-2)
args = parser.parse_args()
paddle.seed(0)
vocab = 11
model = TinyLM(vocab, 8, 2, 0.1)
opt = paddle.optimizer.AdamW(learning_rate=args.lr, parameters=model.parameters())
loss_fn = nn.CrossEntropyLoss(ignore_index=0)
rng = np.random.default_rng(0)
for step in range(5):
    ids = rng.integers(1, vocab, (4, 6))
    mask = (np.arange(6)[None] < rng.integers(3, 7, 4)[:, None]).astype("int64")
    ids = ids * mask  # 0 is the pad token
    labels = np.where(mask > 0, np.roll(ids, -1, axis=1), 0)
    logits = model(paddle.to_tensor(ids), paddle.to_tensor(mask))
    loss = loss_fn(logits.reshape([-1, vocab]), paddle.to_tensor(labels).reshape([-1]))
    opt.clear_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
'''}


def judged(out: Path, statuses: dict):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run.judge(out, statuses, STEPS)
    return code, printed.getvalue()


def both(tmp: Path, scripts: dict):
    """Every side of `run` on the pair, in tmp/out: (out, statuses)."""
    out = tmp / "out"
    run.prepare(out)
    for fw, text in scripts.items():
        (tmp / f"{fw}.py").write_text(text)
    statuses = {side: run.run_side(side, [sys.executable, str(tmp / f"{fw}.py")], out, STEPS) for side, fw in run.SIDES}
    return out, statuses


def paddle_again(done, tmp: Path, text: str):
    """(exit code, summary) of the Paddle script `text` judged against the pair's torch side."""
    out, statuses = done
    mine = tmp / "out"
    shutil.copytree(out, mine)
    (tmp / "pd.py").write_text(text)
    status = run.run_side("paddle", [sys.executable, str(tmp / "pd.py")], mine, STEPS)
    return judged(mine, {**statuses, "paddle": status})


def planted(text: str, line: str, plant: str) -> str:
    assert text.count(line) == 1, f"the plant's line is not in the script once: {line}"
    return text.replace(line, plant)


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return both(tmp_path_factory.mktemp("lm"), LM)


# each loss family: (torch's, Paddle's, Paddle's with a one-line plant, the line the plant must give). Evaluated in
# each framework's own process, through the recorder's own path for a class (wrapping.class_loss) or a functional
# (wrapping.loss_wrapper); the inputs only bind the call's arguments (the class is not run)
FAMILIES = [
    ("nn.MSELoss()", "nn.MSELoss()", "nn.MSELoss(reduction='sum')", "loss: reduction torch mean vs paddle sum"),
    ("nn.L1Loss(reduction='sum')", "nn.L1Loss(reduction='sum')", "nn.L1Loss()",
     "loss: reduction torch sum vs paddle mean"),
    ("nn.SmoothL1Loss(beta=0.5)", "nn.SmoothL1Loss(delta=0.5, is_huber=False)", "nn.SmoothL1Loss(delta=0.5)",
     "loss: scale torch 1 vs paddle 0.5 (torch's huber_loss(delta) is delta x smooth_l1_loss(beta=delta)"),
    ("nn.SmoothL1Loss(beta=0.5)", "nn.SmoothL1Loss(delta=0.5, is_huber=False)",
     "nn.SmoothL1Loss(delta=1.0, is_huber=False)", "loss: beta torch 0.5 vs paddle 1"),
    ("nn.HuberLoss(delta=2.0)", "nn.HuberLoss(delta=2.0)", "nn.HuberLoss()", "loss: beta torch 2 vs paddle 1"),
    ("nn.SmoothL1Loss()", "nn.SmoothL1Loss()", "nn.L1Loss()", "loss: torch smooth_l1_loss vs paddle l1_loss"),
    ("nn.BCELoss(weight=W)", "nn.BCELoss(weight=W)", "nn.BCELoss()",
     "loss: weight torch [1.0, 2.0, 3.0] vs paddle none"),
    ("nn.BCEWithLogitsLoss(pos_weight=W)", "nn.BCEWithLogitsLoss(pos_weight=W)", "nn.BCEWithLogitsLoss()",
     "loss: pos_weight torch [1.0, 2.0, 3.0] vs paddle none"),
    ("nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=1)",
     "nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=1)", "nn.CrossEntropyLoss(label_smoothing=0.1)",
     "loss: ignore_index torch 1 vs paddle -100"),
    ("nn.CrossEntropyLoss()", "nn.CrossEntropyLoss()", "nn.CrossEntropyLoss(use_softmax=False)",
     "loss: use_softmax torch True vs paddle False"),
    ("nn.NLLLoss(weight=W)", "nn.NLLLoss(weight=W)", "nn.NLLLoss()",
     "loss: weight torch [1.0, 2.0, 3.0] vs paddle none"),
    ("nn.KLDivLoss(reduction='batchmean', log_target=True)", "nn.KLDivLoss(reduction='batchmean', log_target=True)",
     "nn.KLDivLoss(reduction='batchmean')", "loss: log_target torch True vs paddle False"),
    ("nn.CTCLoss(blank=0)", "nn.CTCLoss(blank=0)", "nn.CTCLoss(blank=1)", "loss: blank torch 0 vs paddle 1"),
    ("nn.MarginRankingLoss(margin=0.5)", "nn.MarginRankingLoss(margin=0.5)", "nn.MarginRankingLoss()",
     "loss: margin torch 0.5 vs paddle 0"),
    ("nn.CosineEmbeddingLoss(margin=0.2)", "nn.CosineEmbeddingLoss(margin=0.2)", "nn.CosineEmbeddingLoss()",
     "loss: margin torch 0.2 vs paddle 0"),
    ("nn.TripletMarginLoss(eps=1e-5)", "nn.TripletMarginLoss(epsilon=1e-5)", "nn.TripletMarginLoss()",
     "loss: eps torch 1e-05 vs paddle 1e-06"),
    ("nn.HingeEmbeddingLoss(margin=2.0)", "nn.HingeEmbeddingLoss(margin=2.0)", "nn.HingeEmbeddingLoss()",
     "loss: margin torch 2 vs paddle 1"),
    ("nn.MultiMarginLoss(p=2)", "nn.MultiMarginLoss(p=2)", "nn.MultiMarginLoss()", "loss: p torch 2 vs paddle 1"),
    ("nn.MultiLabelSoftMarginLoss()", "nn.MultiLabelSoftMarginLoss()", "nn.MultiLabelSoftMarginLoss(reduction='sum')",
     "loss: reduction torch mean vs paddle sum"),
    ("nn.PoissonNLLLoss(log_input=False)", "nn.PoissonNLLLoss(log_input=False)", "nn.PoissonNLLLoss()",
     "loss: log_input torch False vs paddle True"),
    ("nn.GaussianNLLLoss(full=True)", "nn.GaussianNLLLoss(full=True)", "nn.GaussianNLLLoss()",
     "loss: full torch True vs paddle False"),
    # functionals, as the recorder wraps them; Paddle's own spellings of torch's losses
    ("F.smooth_l1_loss(X, Y, beta=0.5)", "F.smooth_l1_loss(X, Y, delta=0.5, is_huber=False)",
     "F.smooth_l1_loss(X, Y, delta=0.5)", "loss: scale torch 1 vs paddle 0.5"),
    ("F.mse_loss(X, Y, reduction='none')", "F.square_error_cost(X, Y)", "F.mse_loss(X, Y)",
     "loss: reduction torch none vs paddle mean"),
    ("F.binary_cross_entropy_with_logits(X, Y, pos_weight=W)", "F.binary_cross_entropy_with_logits(X, Y, pos_weight=W)",
     "F.binary_cross_entropy_with_logits(X, Y, weight=W)", "loss: weight torch none vs paddle [1.0, 2.0, 3.0]"),
]

EVALUATE = '''
import json, sys
import numpy as np
from portcheck.scripts import wrapping
fw = sys.argv[1]
if fw == "torch":
    import torch as T
    from torch import nn
    import torch.nn.functional as F
    from portcheck.scripts.hooks_torch import TorchSide as Side
    tensor = lambda a: T.from_numpy(np.asarray(a))
else:
    import paddle as T
    from paddle import nn
    import paddle.nn.functional as F
    from portcheck.scripts.hooks_paddle import PaddleSide as Side
    tensor = lambda a: T.to_tensor(np.asarray(a))
side = Side(False)
W = tensor(np.array([1.0, 2.0, 3.0], "float32"))
X, Y = tensor(np.zeros((2, 3), "float32")), tensor(np.zeros((2, 3), "float32"))
IDS = tensor(np.zeros(2, "int64"))
seen = []
class Run:  # what the functionals report to (recorder.Run.loss_call)
    def loss_call(self, name, target, settings):
        seen.append({"function": name, **settings})
        return target
for name in wrapping.framework_losses(F):
    if callable(getattr(F, name)):
        setattr(F, name, wrapping.loss_wrapper(Run(), name, getattr(F, name), fw == "paddle"))
out = []
for expr in json.loads(sys.argv[2]):
    seen.clear()
    if expr.startswith("nn."):
        m = eval(expr)
        kind = side.loss_class(m)
        n = len([p for p in __import__("inspect").signature(m.forward).parameters.values() if p.default is p.empty])
        args = [X] + [IDS if "Entropy" in expr or "NLL" in expr or "MultiMargin" in expr else Y] + [Y] * (n - 2)
        said, settings, _, _ = wrapping.class_loss(m, kind, fw == "paddle", args, {})
        out.append({"function": said, **settings})
    else:
        try:
            eval(expr)
        except Exception:  # the call's values (zeros) may not fit the loss; its settings are recorded before
            pass
        out.append(seen[0])
print("RESULT" + json.dumps(out))
'''


def settings_of(fw: str, exprs: list) -> list:
    p = subprocess.run([sys.executable, "-c", EVALUATE, fw, json.dumps(exprs)], capture_output=True, text=True)
    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT")), None)
    assert line, p.stdout + p.stderr
    return json.loads(line[len("RESULT"):])


UNKNOWN = ["nn.RNNTLoss()", "F.sigmoid_focal_loss(X, Y)"]


@pytest.fixture(scope="module")
def said():
    """Every expression's recorded settings: one process per framework."""
    return {"torch": settings_of("torch", [f[0] for f in FAMILIES] + ["nn.CrossEntropyLoss()"]),
            "paddle": settings_of("paddle", [e for f in FAMILIES for e in f[1:3]] + UNKNOWN)}


def config_lines(t: dict, p: dict) -> list:
    return runconfig.differences({"loss": t}, {"loss": p}, {}, {})


def test_every_loss_family_is_recorded_in_torchs_conventions(said):
    torch_said, paddle_said = said["torch"][:len(FAMILIES)], said["paddle"][:2 * len(FAMILIES)]
    for (t_expr, p_expr, plant, line), t, clean, red in zip(FAMILIES, torch_said, paddle_said[::2], paddle_said[1::2]):
        assert t.get("known") is not False, (t_expr, t)
        assert config_lines(t, clean) == [], (t_expr, p_expr, t, clean)
        lines = config_lines(t, red)
        assert any(x.startswith(line) for x in lines), (plant, lines)


def test_a_loss_portcheck_does_not_know_is_said_so_never_the_same(said):
    t, (rnnt, focal) = said["torch"][-1], said["paddle"][-2:]
    assert rnnt == {"function": "RNNTLoss", "known": False} and focal["function"] == "sigmoid_focal_loss"
    assert config_lines(t, rnnt) == []
    assert runconfig.not_compared({"loss": t}, {"loss": rnnt}) == \
        ["loss: paddle's RNNTLoss is not one portcheck knows: not compared"]
    assert runconfig.not_compared({"loss": t}, {}) == ["loss: the paddle script calls no loss function or class "
                                                        "portcheck knows (a loss computed by hand?): not compared"]


def test_the_lm_pair_is_green_its_tied_head_judged_through_the_embedding(lm, tmp_path):
    out, statuses = lm
    shutil.copytree(out, tmp_path / "clean")
    code, said = judged(tmp_path / "clean", statuses)
    assert code == 0 and "green: the same run" in said, said
    assert "ONE-SIDED torch's head.weight: tied to a tensor paddle holds once" in said, said
    assert statuses["torch"]["config"]["dropouts"] == {"attn": {"type": "Attention", "p": [0.1], "attention": True}}
    assert statuses["paddle"]["config"]["loss"] == statuses["torch"]["config"]["loss"] == {
        "function": "cross_entropy", "reduction": "mean", "weight": None, "ignore_index": 0, "label_smoothing": 0.0,
        "soft_label": False, "use_softmax": True}
    assert statuses["paddle"]["config"]["dropouts"] == {"attn": {"type": "MultiHeadAttention", "p": [0.1],
                                                                 "attention": True}}


POOLER = ("        self.emb = nn.Embedding(vocab, dim, padding_idx=0)",
          "        self.emb, self.pooler = nn.Embedding(vocab, dim, padding_idx=0), nn.Linear(dim, dim)")
PAD_ROW = "padding_idx left out: the pad row's gradient measured"  # docs/run.md's example (pad_row_as_docs_say)
LM_PLANTS = [  # (what, [(a line of the Paddle script, what replaces it)], exit code, what the summary names)
    ("the loss class's reduction", [("loss_fn = nn.CrossEntropyLoss(ignore_index=0)",
                                     'loss_fn = nn.CrossEntropyLoss(ignore_index=0, reduction="sum")')], 1,
     ["DIFFERS loss: reduction torch mean vs paddle sum", "RED: 1 configuration difference(s)"]),
    ("MultiHeadAttention's dropout 0.0", [("nn.MultiHeadAttention(dim, heads, dropout=dropout)",
                                           "nn.MultiHeadAttention(dim, heads, dropout=0.0)")], 1,
     ["DIFFERS attn (Attention): dropout p torch 0.1 vs paddle none", "RED: 1 configuration difference(s)"]),
    (PAD_ROW, [("nn.Embedding(vocab, dim, padding_idx=0)", "nn.Embedding(vocab, dim)")], 0,
     ["DIFFERS emb (Embedding): padding_idx torch 0 vs paddle none; measured here: the pad row's gradient differs by",
      "within the rule: green on these batches", "green: the same run"]),
    ("a one-sided layer never called", [POOLER], 0,
     ["ONE-SIDED paddle's pooler.weight, pooler.bias: no torch tensor; unused by its forward", "green: the same run"]),
    ("a one-sided pooler computed and not returned (paddlenlp's token classifier)",
     [POOLER, ("        h = h + self.attn(h, h, h, attn_mask=mask[:, None, None, :] > 0)",
               "        h = h + self.attn(h, h, h, attn_mask=mask[:, None, None, :] > 0)\n"
               "        pooled = paddle.tanh(self.pooler(h[:, 0]))")], 0,
     ["ONE-SIDED paddle's pooler.weight, pooler.bias: no torch tensor; unused by its forward", "green: the same run"]),
    ("the head untied on Paddle's side",
     [("        self.attn = nn.MultiHeadAttention(dim, heads, dropout=dropout)",
       "        self.attn = nn.MultiHeadAttention(dim, heads, dropout=dropout)\n"
       "        self.head = nn.Linear(dim, vocab, bias_attr=False)"),
      ("        return paddle.matmul(h, self.emb.weight, transpose_y=True)", "        return self.head(h)")], 1,
     ["DIFFERS tied weights: torch's head.weight is its emb.weight, paddle holds them apart (head.weight and "
      "emb.weight)", "the runs part at grad head.weight"]),
]


@pytest.mark.parametrize("what, plants, code, named", LM_PLANTS, ids=[p[0] for p in LM_PLANTS])
def test_a_lm_plant_is_judged_as_named(lm, tmp_path, what, plants, code, named):
    text = LM["paddle"]
    for line, plant in plants:
        text = planted(text, line, plant)
    got, said = paddle_again(lm, tmp_path, text)
    assert got == code, said
    for x in named:
        assert x in said, said
    if what == PAD_ROW:
        pad_row_as_docs_say(tmp_path / "out" / "log_reprod")



def pad_row_as_docs_say(handed_in: Path):
    """docs/run.md's padding_idx example (both languages) is this plant's: the head tied to the embedding gives the
    pad row a gradient of about 0.001 on each side, and the two differ by float32 rounding (the gap's digits move
    between CPUs; within 16 ulps of the row's largest value they do not), as the hand-in carries it."""
    from portcheck.core.report import DIAGNOSTICS
    pad = json.loads((handed_in / DIAGNOSTICS / f"{runconfig.CONFIG}_torch.json").read_text())["measured"]
    assert [m["module"] for m in pad] == ["emb"] and pad[0]["passed"], pad
    (gap, largest), eps = (pad[0]["gap"], max(pad[0]["largest"])), float(np.finfo(np.float32).eps)
    assert all(5e-4 < x < 2e-3 for x in pad[0]["largest"]) and gap <= 16 * eps * largest, pad
    root = Path(__file__).resolve().parent.parent
    for doc, about in (("run.md", "about 0.001 on each side"), ("run_cn.md", "两侧都约为 0.001")):
        assert about in (root / "docs" / doc).read_text(encoding="utf-8"), doc


def test_a_one_sided_layer_the_forward_uses_is_refused_naming_it(lm, tmp_path):
    text = planted(LM["paddle"], "        h = self.emb(ids)", "        h = self.pooler(self.emb(ids))")
    text = planted(text, *POOLER)
    with pytest.raises(PipelineError, match="Paddle pooler.weight no torch tensor fills"):
        paddle_again(lm, tmp_path, text)


def _row(key, passed):
    return SimpleNamespace(key=key, passed=passed)  # what judge_run.measured reads of a diff.KeyResult


class _Report:
    def __init__(self, passed):
        self.grads, self.steps = [_row("grad emb.weight", passed)], [[_row("emb.weight", True)]]


def test_padding_idx_follows_the_numbers_and_stays_red_where_they_cannot_show_it():
    """judge_run.measured on records: a pad row judged green is green; red where the steps' rows are red, and where the
    batch holds no pad token (the steps cannot show it)."""
    grad = np.zeros((4, 2), np.float32)
    t = {"in/emb": np.array([[0, 2, 3]]), "grad/emb.weight": grad}
    p = {"grad/emb.weight": grad + np.float32(1e-31) * np.eye(4, 2, dtype=np.float32)}
    setting = ("emb", "Embedding", "emb", "padding_idx", 0, None)
    line, ok = judge_run.measured(t, p, _Report(True), {"emb": "emb"}, {}, setting)
    assert ok and line.startswith("emb (Embedding): padding_idx torch 0 vs paddle none; measured here: the pad row's "
                                  "gradient differs by 1e-31 (torch's 0, paddle's 1e-31)"), line
    assert line.endswith("green on these batches"), line
    line, ok = judge_run.measured(t, p, _Report(False), {"emb": "emb"}, {}, setting)
    assert not ok and "outside the rule: red" in line, line
    line, ok = judge_run.measured({**t, "in/emb": np.array([[1.0, 2.0, 3.0]])}, p, _Report(True), {"emb": "emb"}, {}, setting)
    assert not ok and "not measured here: no pad token [0] in the first batch" in line, line


def test_a_measured_difference_is_said_by_check_from_what_run_handed_in(tmp_path):
    """The hand-in carries what the steps showed of a measured difference (judge_run.measurement): check says run's line
    from it, red where it was red; a measurement missing, of another module or not run's shape is red, never green."""
    loss = {"function": "cross_entropy"}
    configs = {"torch": {"modules": {"emb": {"type": "Embedding", "padding_idx": 0}}, "loss": loss},
               "paddle": {"modules": {"emb": {"type": "Embedding", "padding_idx": None}}, "loss": loss}}
    setting = ("emb", "Embedding", "emb", "padding_idx", 0, None)

    def handed(*measured):
        runconfig.hand_in(tmp_path, configs, {"emb": "emb"}, {}, ([0.1], [0.1]), {"torch": {}, "paddle": {}},
                          "test", measured=measured)
        return runconfig.from_folder(tmp_path)
    green = {"module": "emb", "gap": 1e-31, "largest": [0.0, 1e-31], "passed": True}
    line, ok = runconfig.measured_line(setting, green)
    assert ok and handed(green) == ([], "", [("DIFFERS", line)])
    red = {**green, "passed": False}
    assert handed(red) == ([runconfig.measured_line(setting, red)[0]], "", []) and "red on these batches" in \
        handed(red)[0][0]
    unseen = {"module": "emb", "gap": None}
    assert handed(unseen)[0] == [runconfig.measured_line(setting, unseen)[0]]
    for hostile in [(), ({**green, "module": "other"},), ({**green, "largest": "0"},), ({**green, "passed": 1},),
                    (green, green)]:
        lines, problem, _ = handed(*hostile)
        assert lines == [] and "do not read as configuration records" in problem, (hostile, problem)


def test_paddles_mean_over_ignored_labels_is_what_docs_run_says():
    """docs/run.md (both languages): Paddle's cross_entropy(ignore_index=-100) with reduction mean divides by every
    label, the ignored ones too, torch's by the others (the loss pair red, two labels of six ignored: 1.5x); with
    ignore_index the pad id both divide by the same labels. The pages name the Paddle requirements.txt pins."""
    import paddle
    import torch
    root = Path(__file__).resolve().parent.parent
    logits = np.random.default_rng(0).standard_normal((6, 4)).astype("float32")
    mean = {}
    for ignored, labels in ((-100, [1, -100, 2, -100, 3, 0]), (0, [1, 0, 2, 0, 3, 1])):
        t = torch.nn.functional.cross_entropy(torch.from_numpy(logits), torch.tensor(labels), ignore_index=ignored)
        s = torch.nn.functional.cross_entropy(torch.from_numpy(logits), torch.tensor(labels), ignore_index=ignored,
                                              reduction="sum")
        p = paddle.nn.functional.cross_entropy(paddle.to_tensor(logits), paddle.to_tensor(labels),
                                               ignore_index=ignored)
        mean[ignored] = float(t), float(p), float(s)
    t, p, s = mean[-100]
    assert np.isclose(t, s / 4) and np.isclose(p, s / 6) and t / p > 1.4, mean
    t, p, s = mean[0]
    assert np.isclose(t, s / 4) and np.isclose(p, t), mean
    pinned = re.search(r"^paddlepaddle==(\S+)", (root / "requirements.txt").read_text(), re.M).group(1)
    assert paddle.__version__ == pinned, (paddle.__version__, pinned)
    for doc, said in (("run.md", f"Paddle {pinned}'s `cross_entropy(..., ignore_index=-100)`"),
                      ("run_cn.md", f"Paddle {pinned} 的 `cross_entropy(..., ignore_index=-100)`")):
        assert said in (root / "docs" / doc).read_text(encoding="utf-8"), doc


def test_a_clipping_over_other_parameters_is_one_line():
    """torch's clip_grad_norm_ given a part of the model, or Paddle's layer need_clip=False: the parameters in the
    norm differ, named; the same parameters under their own names on each side are the same."""
    held = lambda *names: {"optimizer": {"weight_decay": {n: [0.0, "decoupled"] for n in names}}}
    clip = {"clip": {"kind": "global_norm", "bound": 1.0}}
    t = {**held("fc.weight", "head.weight"), **clip, "clip_scope": ["fc.weight", "head.weight"]}
    p = {**held("fc.weight", "out.weight"), **clip, "clip_scope": ["fc.weight", "out.weight"]}
    modules = {"fc": "fc", "head": "out"}
    assert runconfig.differences(t, p, modules, {}) == []
    lines = runconfig.differences(t, {**p, "clip_scope": ["fc.weight"]}, modules, {})
    assert lines == ["gradient clipping: the parameters in the norm differ: head.weight clipped on torch's side only "
                     "(torch's clip_grad_norm_ is given the parameters, Paddle's grad_clip takes its optimizer's but "
                     "need_clip=False)"], lines
    assert "fc.weight clipped on paddle's side only" in runconfig.differences({**t, "clip_scope": ["head.weight"]}, p,
                                                                             modules, {})[0]


def test_dropouts_given_as_numbers_and_autocast_each_one_line():
    """A functional dropout against a Dropout module of the same p is the same; two Dropout modules are compared as
    modules (their own line), never twice; an autocast dtype on one side is named."""
    modules = {"block": "block", "block.drop": "block.drop"}
    functional = {"dropouts": {"block": {"type": "Block", "p": [0.1]}}}
    module = lambda p: {"modules": {"block.drop": {"type": "Dropout", "p": p}}}
    assert runconfig.differences(functional, module(0.1), modules, {}) == []
    assert runconfig.differences(functional, module(0.2), modules, {}) == \
        ["block (Block): dropout p torch 0.1 vs paddle 0.2 (a dropout its forward gives as a number; off for the "
         "steps, so compared here)"]
    assert runconfig.differences(module(0.1), module(0.2), modules, {}) == \
        ["block.drop (Dropout): p torch 0.1 vs paddle 0.2"]
    assert runconfig.differences({"autocast": "bfloat16"}, {}, {}, {}) == \
        ["autocast: the first forward computes in torch bfloat16 vs paddle none"]


def test_torchs_float64_run_widens_a_float32_attention_mask_its_kernel_misreads():
    """A causal mask a script builds in float32 (torch.full(..., -inf) in its forward) beside the float64 run's
    queries: torch's CPU kernel reads it wrong at 63 positions, so torch's own error, the yardstick, was 3.4 on the
    attention and 76 on the logits, and a Paddle port's mask planted off by one was within it (found by a pair of
    scripts written outside the project). The float64 run widens the mask, exactly, positional or keyword."""
    from types import SimpleNamespace

    import torch
    import torch.nn.functional as F

    from portcheck.scripts.wrapping import no_attention_dropout
    q = torch.randn(2, 2, 63, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    mask = torch.triu(torch.full((63, 63), float("-inf")), diagonal=1)
    right = F.scaled_dot_product_attention(q, q, q, attn_mask=mask.double())
    wrapped = no_attention_dropout(SimpleNamespace(side="torch64", sites=False, dropout_off=True),
                                   F.scaled_dot_product_attention)
    for got in (wrapped(q, q, q, mask), wrapped(q, q, q, attn_mask=mask)):
        assert torch.allclose(got, right, rtol=0, atol=1e-12), (got - right).abs().max()
    # the kernel itself, as docs/run.md says it: off by about 3 at 63 positions, right at 5
    assert 1 < (F.scaled_dot_product_attention(q, q, q, attn_mask=mask) - right).abs().max() < 10
    small = q[:, :, :5]
    assert torch.equal(F.scaled_dot_product_attention(small, small, small, attn_mask=mask[:5, :5]),
                       F.scaled_dot_product_attention(small, small, small, attn_mask=mask[:5, :5].double()))


def test_convert_keeps_a_paddle_layer_its_run_never_calls_and_says_so():
    """portcheck.convert, as `run`: with inputs= the run shows a Paddle layer unused (a pooler): kept at Paddle's own
    value, said in one line; without inputs nothing shows it unused and it is refused, naming it."""
    import paddle
    import torch
    from portcheck.mapping.convert import convert

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)

    class PaddleNet(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc, self.pooler = paddle.nn.Linear(3, 2), paddle.nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x)
    t, p = TorchNet(), PaddleNet()
    before = p.pooler.weight.numpy().copy()
    with pytest.raises(PipelineError, match="Paddle keys no torch tensor fills: pooler.weight"):
        convert(t, p)
    state = convert(t, p, inputs=np.ones((2, 3), np.float32))
    assert state.kept == ["pooler.weight", "pooler.bias"] and state.said.startswith(
        "Paddle's pooler.weight, pooler.bias: no torch tensor; unused by its forward on inputs: kept"), state.said
    assert np.array_equal(p.pooler.weight.numpy(), before)
    assert np.array_equal(p.fc.weight.numpy(), t.fc.weight.detach().numpy().T)


def test_each_sides_schedule_is_stepped_ahead_on_a_copy_as_it_would_step():
    """A cosine stepped per epoch shows none of its T_max over the run's steps: a copy of each side's schedule is
    stepped on (recorder.AHEAD), its lrs the real schedule's, the script's own schedule and parameters untouched."""
    import paddle
    import torch
    from portcheck.scripts.hooks_paddle import PaddleSide
    from portcheck.scripts.hooks_torch import TorchSide
    w = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)
    warm = torch.optim.lr_scheduler.LinearLR(opt, 0.5, 1.0, total_iters=2)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cosine], milestones=[2])
    ahead = TorchSide(False).lr_ahead(opt, [warm, cosine, sched], 5)
    assert opt.param_groups[0]["lr"] == 0.05 and sched.last_epoch == 0 and opt.param_groups[0]["params"][0] is w
    real = []
    for _ in range(5):
        opt.step(), sched.step()
        real.append(opt.param_groups[0]["lr"])
    assert ahead == real
    pd_sched = paddle.optimizer.lr.CosineAnnealingDecay(0.1, T_max=4)
    pd_opt = paddle.optimizer.SGD(pd_sched, parameters=[paddle.create_parameter([2], "float32")])
    pd_ahead = PaddleSide().lr_ahead(pd_opt, [], 3)
    assert pd_sched.last_epoch == 0 and pd_ahead == [float(pd_sched.step() or pd_sched()) for _ in range(3)]
    # a schedule with an end: its copy stops there (OneCycleLR raises past total_steps), compared up to it
    one_cycle = torch.optim.lr_scheduler.OneCycleLR(torch.optim.SGD([w], lr=0.1), 0.1, total_steps=4)
    assert 0 < len(TorchSide(False).lr_ahead(one_cycle.optimizer, [one_cycle], 10)) < 10
    assert runconfig.ahead([[0.1, 0.2, 0.3]], [[0.1, 0.2, 0.3, 0.4]]) == []
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.SGD([w], lr=0.1))
    assert TorchSide(False).lr_ahead(plateau.optimizer, [plateau], 3) == "stepped on a metric"


def test_schedules_that_part_past_the_run_are_one_line_naming_the_step():
    same = [0.1, 0.075, 0.05]
    assert runconfig.ahead([same], [list(same)]) == []
    assert runconfig.ahead([same], [[0.1, 0.08, 0.05]]) == [
        "scheduler: lr 2 scheduler step(s) past the run torch 0.075 vs paddle 0.08 (a copy of each side's schedule "
        "stepped on: its settings differ)"]
    assert runconfig.ahead(["stepped on a metric"], ["stepped on a metric"]) == []
    assert runconfig.ahead(["stepped on a metric"], [same]) == [
        "scheduler: schedule torch stepped on a metric vs paddle stepped on its own"]
    # the run's own lrs differing is one line already: not said twice
    config = {"ahead": [same]}
    lines = runconfig.differences(config, {"ahead": [[0.2] * 3]}, {}, {}, ([0.1], [0.2]))
    assert [line for line in lines if "scheduler" in line] == ["scheduler: lr over the 1 steps torch [0.1] vs paddle [0.2]"]
