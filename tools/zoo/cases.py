"""The zoo's table: one row a case, declared as data. tools/zoo/run.py runs it, tests/test_zoo.py its fast part.

A case names the pair (each side's own class and settings), the check that runs it (tools/zoo/checks/), the
guide's steps it covers, and its plants: each a one-line porting bug as an override of the Paddle side's settings,
with the step, the place (a module, parameter or key, as the library names it) and the cause it must be red at;
a plant with `refused` must be refused before anything is judged: a one-line error saying that text and the place.
The correct port must be green at every rule its check applies; each plant red at its step, named at its place.

A case or plant the library judges wrongly today carries `known`: the issue that tracks it and why, with the
verdict it gets (run.py reports it as a known mismatch, the suite as a strict xfail: fixed, it fails until the
line is removed). `skip`: a case the public API cannot express yet, and why.
"""

# the scheduler cases' common settings: 12 steps from a fine-tuning lr (torch's read before each step, Paddle's
# get_lr)
LR = 3e-4
SCHED = {"check": "scheduler", "group": "scheduler", "steps": (4,), "fast": True, "steps_n": 12, "lr": LR}


def sched(name, torch, paddle, plants, **more):
    return {**SCHED, "name": name, "torch": torch, "paddle": paddle, "plants": plants, **more}


# What the library judges wrongly today, each with the issue tracking it: the verdict it gets and why.
LR_ULPS = {"issue": 47, "got": "false red", "why": "the lr pair's exact rule: Paddle's closed form and torch's "
           "recursive product round apart in the last bit (deliverable 2: a few ulps, said)"}
LN_EPS_STEP4 = {"issue": 47, "got": "false green at step 4", "why": "compare_backward is green on one LayerNorm "
                "epsilon of 1e-5 that compare_forward names (deliverable 2: K for gradients from the zoo)"}


def lr_at(i):
    """Where a schedule bug must be named: the lr pair's first differing key, compare_backward's lr row."""
    return {"lr pair": f"lr_{i}", "compare_backward": f"lr after step {i + 1}"}


SCHEDULERS = [
    sched("StepLR", ("StepLR", {"step_size": 3, "gamma": 0.1}), ("StepDecay", {"learning_rate": LR, "step_size": 3,
                                                                                "gamma": 0.1}),
          [{"name": "step_size off by one", "paddle": {"step_size": 4}, "step": 4, "where": lr_at(3),
            "cause": "the decay one step late"}]),
    sched("MultiStepLR", ("MultiStepLR", {"milestones": [3, 7], "gamma": 0.1}),
          ("MultiStepDecay", {"learning_rate": LR, "milestones": [3, 7], "gamma": 0.1}),
          [{"name": "milestones counted from 1", "paddle": {"milestones": [4, 8]}, "step": 4, "where": lr_at(3),
            "cause": "each decay one step late"}]),
    sched("MultiStepLR as PiecewiseDecay", ("MultiStepLR", {"milestones": [3, 7], "gamma": 0.1}),
          ("PiecewiseDecay", {"boundaries": [3, 7], "values": [LR, LR * 0.1, LR * 0.1 * 0.1]}),
          [{"name": "values of another gamma", "paddle": {"values": [LR, LR * 0.5, LR * 0.25]}, "step": 4,
            "where": lr_at(3),
            "cause": "gamma 0.5 for 0.1"}]),
    sched("ExponentialLR", ("ExponentialLR", {"gamma": 0.9}), ("ExponentialDecay", {"learning_rate": LR,
                                                                                    "gamma": 0.9}),
          [{"name": "gamma 0.99", "paddle": {"gamma": 0.99}, "step": 4, "where": lr_at(1), "cause": "another gamma"}]),
    sched("CosineAnnealingLR", ("CosineAnnealingLR", {"T_max": 10, "eta_min": 0.001}),
          ("CosineAnnealingDecay", {"learning_rate": LR, "T_max": 10, "eta_min": 0.001}),
          [{"name": "eta_min left out", "paddle": {"eta_min": 0}, "step": 4, "where": lr_at(1),
            "cause": "the floor of the cosine"}]),
    sched("CosineAnnealingWarmRestarts", ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2}),
          ("CosineAnnealingWarmRestarts", {"learning_rate": LR, "T_0": 3, "T_mult": 2}),
          [{"name": "T_mult left at 1", "paddle": {"T_mult": 1}, "step": 4, "where": lr_at(4),
            "cause": "the second cycle as long as the first"}]),
    sched("LinearLR warmup", ("LinearLR", {"start_factor": 0.25, "total_iters": 4}),
          ("LinearLR", {"learning_rate": LR, "start_factor": 0.25, "total_steps": 4}),
          [{"name": "warmup off by one", "paddle": {"total_steps": 5}, "step": 4, "where": lr_at(1),
            "cause": "a warmup one step longer"}]),
    sched("LinearLR as LinearWarmup", ("LinearLR", {"start_factor": 0.25, "total_iters": 4}),
          ("LinearWarmup", {"learning_rate": LR, "warmup_steps": 4, "start_lr": LR * 0.25, "end_lr": LR}),
          [{"name": "warmup starting at 0", "paddle": {"start_lr": 0.0}, "step": 4, "where": lr_at(0),
            "cause": "another start of the warmup"}]),
    sched("OneCycleLR", ("OneCycleLR", {"max_lr": LR, "total_steps": 12, "cycle_momentum": False}),
          ("OneCycleLR", {"max_learning_rate": LR, "total_steps": 12, "end_learning_rate": LR / 25 / 1e4}),
          [{"name": "end_learning_rate left at Paddle's default", "paddle": {"end_learning_rate": 0.0001}, "step": 4,
            "where": lr_at(3), "cause": "torch's end is initial / 1e4, Paddle's an absolute 1e-4"}]),
    sched("PolynomialLR", ("PolynomialLR", {"total_iters": 10, "power": 2.0}),
          ("PolynomialDecay", {"learning_rate": LR, "decay_steps": 10, "end_lr": 0.0, "power": 2.0}),
          [{"name": "end_lr left at Paddle's default", "paddle": {"end_lr": 0.0001}, "step": 4, "where": lr_at(1),
            "cause": "Paddle's default end_lr 1e-4, torch's 0"}]),
    sched("CyclicLR", ("CyclicLR", {"base_lr": LR / 10, "max_lr": LR, "step_size_up": 3, "cycle_momentum": False}),
          ("CyclicLR", {"base_learning_rate": LR / 10, "max_learning_rate": LR, "step_size_up": 3}),
          [{"name": "triangular2", "paddle": {"mode": "triangular2"}, "step": 4, "where": lr_at(7),
            "cause": "the second cycle's amplitude halved"}], lr=LR / 10),
    sched("LambdaLR", ("LambdaLR", {"lr_lambda": "0.9^s"}), ("LambdaDecay", {"learning_rate": LR,
                                                                             "lr_lambda": "0.9^s"}),
          [{"name": "lambda one step ahead", "paddle": {"lr_lambda": "0.9^(s+1)"}, "step": 4, "where": lr_at(0),
            "cause": "the schedule one step ahead"}]),
    sched("LambdaLR as InverseTimeDecay", ("LambdaLR", {"lr_lambda": "1/(1+0.5s)"}),
          ("InverseTimeDecay", {"learning_rate": LR, "gamma": 0.5}),
          [{"name": "gamma 0.1", "paddle": {"gamma": 0.1}, "step": 4, "where": lr_at(1), "cause": "another gamma"}]),
    sched("MultiplicativeLR", ("MultiplicativeLR", {"lr_lambda": "0.95"}),
          ("MultiplicativeDecay", {"learning_rate": LR, "lr_lambda": "0.95"}),
          [{"name": "another factor", "paddle": {"lr_lambda": "0.9"}, "step": 4, "where": lr_at(1),
            "cause": "0.9 for 0.95"}]),
    # warmup then cosine: torch chains two schedules (SequentialLR), Paddle wraps one (LinearWarmup)
    sched("SequentialLR as LinearWarmup", ("SequentialLR", {"schedulers": [
              ("LinearLR", {"start_factor": 0.25, "total_iters": 3}), ("CosineAnnealingLR", {"T_max": 8})],
              "milestones": [3]}),
          ("LinearWarmup", {"learning_rate": ("CosineAnnealingDecay", {"learning_rate": LR, "T_max": 8}),
                            "warmup_steps": 3, "start_lr": LR * 0.25, "end_lr": LR}),
          [{"name": "cosine over the whole run", "paddle": {"learning_rate": ("CosineAnnealingDecay", {
              "learning_rate": LR, "T_max": 11})}, "step": 4, "where": lr_at(4),
            "cause": "the cosine's T_max counted with the warmup"}]),
    sched("ReduceLROnPlateau", ("ReduceLROnPlateau", {"factor": 0.5, "patience": 1}),
          ("ReduceOnPlateau", {"learning_rate": LR, "factor": 0.5, "patience": 1}),
          [{"name": "patience left at Paddle's default", "paddle": {"patience": 10}, "step": 4,
            "where": {"lr pair": "lr_"},
            "cause": "Paddle's default patience 10"}]),
]

# ---- optimizers: compare_backward, 3 steps of a small MLP, cumulative and isolated ----
OPT = {"check": "optimizer", "group": "optimizer", "steps": (4,), "fast": True, "steps_n": 3}


def opt(name, torch, paddle, plants, **more):
    return {**OPT, "name": name, "torch": torch, "paddle": paddle, "plants": plants, **more}


OPTIMIZERS = [
    opt("SGD", ("SGD", {"lr": 0.1, "weight_decay": 0.01}),
        ("SGD", {"learning_rate": 0.1, "weight_decay": 0.01}),
        [{"name": "weight decay left out", "paddle": {"weight_decay": None}, "step": 4, "where": "0.weight",
          "cause": "no weight decay"}]),
    opt("SGD momentum", ("SGD", {"lr": 0.1, "momentum": 0.9}), ("Momentum", {"learning_rate": 0.1, "momentum": 0.9}),
        [{"name": "momentum 0.1 (Paddle's BatchNorm convention)", "paddle": {"momentum": 0.1}, "step": 4,
          "where": "0.weight", "cause": "another momentum"}]),
    opt("SGD Nesterov", ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
        ("Momentum", {"learning_rate": 0.1, "momentum": 0.9, "use_nesterov": True}),
        [{"name": "Nesterov left out", "paddle": {"use_nesterov": False}, "step": 4, "where": "0.weight",
          "cause": "plain momentum"}]),
    opt("Adam", ("Adam", {"lr": 0.01}), ("Adam", {"learning_rate": 0.01}),
        [{"name": "epsilon 1e-6", "paddle": {"epsilon": 1e-6}, "step": 4, "where": "0.weight",
          "cause": "another epsilon"},
         {"name": "beta2 0.99", "paddle": {"beta2": 0.99}, "step": 4, "where": "0.weight",
          "cause": "another beta2"}]),
    opt("AdamW", ("AdamW", {"lr": 0.01, "weight_decay": 0.1}), ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.1}),
        [{"name": "weight decay left at Paddle's default 0.01", "paddle": {"weight_decay": 0.01}, "step": 4,
          "where": "0.weight", "cause": "another weight decay"}]),
    opt("RMSprop", ("RMSprop", {"lr": 0.01, "alpha": 0.99, "eps": 1e-8}),
        ("RMSProp", {"learning_rate": 0.01, "rho": 0.99, "epsilon": 1e-16}),  # Paddle adds it inside the root
        [{"name": "rho left at Paddle's default 0.95", "paddle": {"rho": 0.95}, "step": 4, "where": "0.weight",
          "cause": "another smoothing constant"},
         {"name": "epsilon copied as it is", "paddle": {"epsilon": 1e-8}, "step": 4, "where": "0.weight",
          "cause": "torch adds eps to the root, Paddle inside it: 1e-8 there is torch's 1e-4"}],
        # no Paddle setting is torch's RMSprop: red, the library's one line saying why (measured: every Paddle
        # epsilon from 0 to 1e-12 leaves 10 to 14 x the allowance against torch's eps 1e-8; 1e-10 or less is green)
        by_design="torch.optim.RMSprop adds eps outside the square root"),
    opt("Adagrad", ("Adagrad", {"lr": 0.1, "eps": 1e-10}), ("Adagrad", {"learning_rate": 0.1, "epsilon": 1e-10}),
        [{"name": "initial accumulator 0.1", "paddle": {"initial_accumulator_value": 0.1}, "step": 4,
          "where": "0.weight", "cause": "another initial accumulator"}]),
    opt("Adadelta", ("Adadelta", {"lr": 1.0, "rho": 0.9, "eps": 1e-6}),
        ("Adadelta", {"learning_rate": 1.0, "rho": 0.9, "epsilon": 1e-6}),
        [{"name": "rho left at Paddle's default 0.95", "paddle": {"rho": 0.95}, "step": 4, "where": "0.weight",
          "cause": "another rho"}]),
    opt("Adamax", ("Adamax", {"lr": 0.01}), ("Adamax", {"learning_rate": 0.01}),
        [{"name": "beta1 0.8", "paddle": {"beta1": 0.8}, "step": 4, "where": "0.weight",
          "cause": "another beta1"}]),
    opt("NAdam", ("NAdam", {"lr": 0.01}), ("NAdam", {"learning_rate": 0.01}),
        [{"name": "momentum decay 0.04", "paddle": {"momentum_decay": 0.04}, "step": 4, "where": "0.",  # every update
          "cause": "another momentum_decay"}]),
    # RAdam's first steps are momentum SGD until its variance is tractable (rho_t > 5): beta2 acts from step 6
    opt("RAdam", ("RAdam", {"lr": 0.01}), ("RAdam", {"learning_rate": 0.01}),
        # the plain run holds no weights between step 1 and the last: its first red row is the loss they move
        [{"name": "beta2 0.99", "paddle": {"beta2": 0.99}, "step": 4,
          "where": {"compare_backward (K": "loss after step 7", "compare_backward, isolated": "0.weight after step 6"},
          "cause": "another beta2"}], steps_n=8),
    opt("Rprop", ("Rprop", {"lr": 0.01}), ("Rprop", {"learning_rate": 0.01}),
        [{"name": "etas (0.4, 1.2)", "paddle": {"etas": (0.4, 1.2)}, "step": 4, "where": "0.weight",
          "cause": "another decrease factor"}]),
    # two algorithms of one name: red, the library's one line saying so
    opt("ASGD", ("ASGD", {"lr": 0.01}), ("ASGD", {"learning_rate": 0.01}), [], by_design="torch.optim.ASGD is averaged SGD"),
    opt("AdamW, no decay on biases", ("AdamW", {"lr": 0.01, "weight_decay": 0.1}),
        ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.1, "decay_weights_only": True}),
        [{"name": "decay on every parameter", "paddle": {"decay_weights_only": False}, "step": 4, "where": "bias",
          "cause": "the biases decayed too"}], groups=True),
    # clipping: torch's clip_grad_*_ called between backward and step (compare_backward(clip=)), Paddle's the
    # optimizer's grad_clip; the MLP's first gradient has a global norm of 0.91, its largest value 0.22
    opt("gradient clipping by norm", ("SGD", {"lr": 0.1}), ("SGD", {"learning_rate": 0.1}),
        [{"name": "clipping left out", "clip": None, "step": 4, "where": "0.weight",
          "cause": "no grad_clip on Paddle's optimizer"},
         {"name": "each parameter's norm (ClipGradByNorm)", "clip": ("each", 0.5), "step": 4, "where": "0.weight",
          "cause": "ClipGradByNorm bounds each parameter's norm, torch's clip_grad_norm_ the global one (every "
          "gradient scaled otherwise)"}],
        clip=("norm", 0.5)),
    opt("gradient clipping by value", ("SGD", {"lr": 0.1}), ("SGD", {"learning_rate": 0.1}),
        [{"name": "clipping left out", "clip": None, "step": 4, "where": "0.weight",
          "cause": "no grad_clip on Paddle's optimizer"},
         {"name": "another bound", "clip": ("value", 0.2), "step": 4, "where": "0.weight",
          "cause": "the bound 0.2 for 0.1"}],
        clip=("value", 0.1)),
]

# ---- losses: Step 3, the loss pair by the measured rule, each in float32 and float64 ----
LOSS = {"check": "loss", "group": "loss", "steps": (3,), "fast": True}


def losses(name, torch, paddle, plants, **more):
    return [{**LOSS, "name": f"{name} {dtype}", "dtype": dtype, "torch": torch, "paddle": paddle, "plants": plants,
             **more} for dtype in ("float32", "float64")]


WEIGHTS = [0.5, 1.0, 2.0, 1.0, 0.25]
LOSSES = [
    *losses("cross entropy, label smoothing", ("cross_entropy", {"label_smoothing": 0.1}),
            ("cross_entropy", {"label_smoothing": 0.1}),
            [{"name": "label smoothing left out", "paddle": {"label_smoothing": 0.0}, "step": 3, "where": "loss",
              "cause": "no label smoothing"}], target="classes"),
    *losses("cross entropy, class weights", ("cross_entropy", {"weight": WEIGHTS}), ("cross_entropy",
                                                                                     {"weight": WEIGHTS}),
            [{"name": "class weights left out", "paddle": {"weight": None}, "step": 3, "where": "loss",
              "cause": "no class weights"}], target="classes"),
    *losses("cross entropy, ignore_index", ("cross_entropy", {"ignore_index": 0}), ("cross_entropy",
                                                                                   {"ignore_index": 0}),
            [{"name": "ignore_index left at -100", "paddle": {"ignore_index": -100}, "step": 3, "where": "loss",
              "cause": "padding counted"}], target="classes", ignored=0),
    *losses("BCE with logits, pos_weight", ("binary_cross_entropy_with_logits", {"pos_weight": WEIGHTS}),
            ("binary_cross_entropy_with_logits", {"pos_weight": WEIGHTS}),
            [{"name": "pos_weight passed as weight", "paddle": {"pos_weight": None, "weight": WEIGHTS}, "step": 3,
              "where": "loss", "cause": "weight is not pos_weight"}], target="binary"),
    *losses("MSE", ("mse_loss", {}), ("mse_loss", {}),
            [{"name": "reduction sum", "paddle": {"reduction": "sum"}, "step": 3, "where": "loss",
              "cause": "summed, not averaged"}], target="values"),
    *losses("L1", ("l1_loss", {}), ("l1_loss", {}),
            [{"name": "MSE for L1", "paddle_name": "mse_loss", "step": 3, "where": "loss", "cause": "another loss"}],
            target="values"),
    *losses("SmoothL1 beta 0.5", ("smooth_l1_loss", {"beta": 0.5}), ("smooth_l1_loss", {"delta": 0.5}),
            [{"name": "delta taken for beta", "divide": 1.0, "step": 3, "where": "loss",
              "cause": "Paddle's delta is Huber's: smooth L1 is it divided by beta"}], target="values", divide=0.5),
    *losses("KLDiv batchmean", ("kl_div", {"reduction": "batchmean"}), ("kl_div", {"reduction": "batchmean"}),
            [{"name": "reduction mean", "paddle": {"reduction": "mean"}, "step": 3, "where": "loss",
              "cause": "mean over every element, not the batch"}], target="probabilities", first="log_softmax"),
    *losses("BCE on probabilities", ("binary_cross_entropy", {}), ("binary_cross_entropy", {}),
            [{"name": "probabilities taken for logits", "paddle_name": "binary_cross_entropy_with_logits",
              "step": 3, "where": "loss", "cause": "sigmoid applied twice"}], target="binary", first="sigmoid"),
    *losses("multi-label soft margin", ("multilabel_soft_margin_loss", {}), ("multi_label_soft_margin_loss", {}),
            [{"name": "class weights on one side", "paddle": {"weight": WEIGHTS}, "step": 3, "where": "loss",
              "cause": "weighted classes"}], target="binary"),
    *losses("Poisson NLL", ("poisson_nll_loss", {}), ("poisson_nll_loss", {}),
            [{"name": "Stirling term on one side", "paddle": {"full": True}, "step": 3, "where": "loss",
              "cause": "full=True adds the Stirling approximation"}], target="counts"),
    *losses("NLL", ("nll_loss", {}), ("nll_loss", {}),
            [{"name": "softmax, not log_softmax", "first": "softmax", "step": 3, "where": "loss",
              "cause": "probabilities for log-probabilities"}], target="classes", first="log_softmax"),
]

# ---- metrics: Step 2, the metric pair exactly, in float32 and float64 ----
METRIC = {"check": "metric", "group": "metric", "steps": (2,), "fast": True}


def metrics(name, paddle_plant, cause, inputs="classes", known_float64=None):
    return [{**METRIC, "name": f"{name} {dtype}", "dtype": dtype, "torch": name, "paddle": name, "input": inputs,
             "plants": [{"name": f"{paddle_plant} for {name}", "paddle": paddle_plant, "step": 2, "where": "metric",
                         "cause": cause}], **({"known": known_float64} if known_float64 and dtype == "float64" else {})}
            for dtype in ("float32", "float64")]


METRICS = [
    *metrics("accuracy", "accuracy >", "a score of exactly 0.5 counted negative", inputs="scores"),
    *metrics("macro f1", "micro f1", "F1 pooled over the classes"),
    *metrics("micro f1", "macro f1", "F1 averaged over the classes"),
    *metrics("weighted f1", "macro f1", "classes not weighted by their support"),
    *metrics("auc", "auc, ties as 0", "ties counted as misordered", inputs="scores"),
    *metrics("macro precision", "macro recall", "false negatives counted for false positives"),
    *metrics("mcc", "mcc >", "a score of exactly 0.5 counted negative", inputs="scores"),
]

CASES = SCHEDULERS + OPTIMIZERS + LOSSES + METRICS


def by_name() -> dict:
    names = [c["name"] for c in CASES]
    assert len(set(names)) == len(names), "two cases of one name"
    return {c["name"]: c for c in CASES}

# ---- models: Step 1 (compare_forward, cumulative and isolated) and Step 4 (compare_backward, 2 steps) ----
MODEL = {"check": "model", "group": "model", "steps": (1, 4), "fast": False}


def model(name, builder, plants, **more):
    return {**MODEL, "name": name, "model": builder, "plants": plants, **more}


def norm_eps(path, where, value=1e-5, attr="_epsilon", steps=(1, 4), **more):
    return {"name": f"one norm's epsilon {value:g}", "set": [(path, attr, value)], "step": steps, "where": where,
            "cause": "another epsilon in one norm", **more}


MODELS = [
    model("BERT (transformers / paddlenlp)", "bert",
          [norm_eps("encoder.layers.0.norm1", "encoder.layer.0.attention.output"),
           {"name": "square query weight transposed", "transpose": ["encoder.layers.1.self_attn.q_proj.weight"],
            "step": 1, "where": "encoder.layer.1.attention.self.query", "cause": "a Linear weight left in torch's "
            "[out, in] layout"}]),
    model("DistilBERT (transformers / paddlenlp)", "distilbert",
          [norm_eps("encoder.layers.0.norm1", "transformer.layer.0")]),
    model("Electra (transformers / paddlenlp)", "electra",
          [norm_eps("encoder.layers.0.norm2", "encoder.layer.0.output")]),
    model("GPT-2 split q/k/v (transformers / paddlenlp)", "gpt2 split",
          [norm_eps("decoder.layers.0.norm1", "h.0.ln_1", value=1e-6)]),
    model("GPT-2 fused qkv (transformers / paddlenlp)", "gpt2 fused",
          [norm_eps("decoder.layers.0.norm1", "h.0.ln_1", value=1e-6),  # GPT-2's is 1e-5, paddlenlp's too
           {"name": "qkv columns in GPT-2's [q | k | v] order", "qkv_not_per_head": [
               (f"decoder.layers.{i}.self_attn.qkv_proj", 4) for i in range(2)], "step": (1, 4),
            "where": "h.0.attn.c_attn", "cause": "paddlenlp's qkv_proj is read per head: its columns left as "
            "GPT-2's c_attn holds them"}]),
    model("RoBERTa (transformers / paddlenlp)", "roberta",
          [norm_eps("encoder.layers.0.norm1", "encoder.layer.0.attention.output")]),
    model("ERNIE (transformers / paddlenlp)", "ernie",
          [norm_eps("encoder.layers.0.norm1", "encoder.layer.0.attention.output")]),
    model("ALBERT (transformers / paddlenlp)", "albert",
          [norm_eps("embeddings.layer_norm", "embeddings.LayerNorm")]),
    model("OPT (transformers / paddlenlp)", "opt",
          [norm_eps("decoder.layers.0.norm2", "decoder.layers.0.final_layer_norm", value=1e-6)]),  # both default to 1e-5
    model("BLOOM (transformers / paddlenlp)", "bloom",
          [norm_eps("h.0.input_layernorm", "h.0.input_layernorm", value=1e-6)]),  # both default to 1e-5
    model("Llama (transformers / paddlenlp)", "llama",
          [norm_eps("llama.layers.1.input_layernorm", "model.layers.1.input_layernorm", attr="variance_epsilon"),
           {"name": "rotary base 5e5", "config": {"rope_theta": 500000.0}, "step": 1,
            "where": "model.layers.0.self_attn",
            "cause": "another rope_theta"}]),
    model("ResNet-18 (transformers / paddle.vision)", "resnet18",
          [norm_eps("layer1.0.bn1", "stages.0.layers.0.layer.0.normalization", value=1e-3)]),
    model("MobileNetV2 (transformers / paddle.vision)", "mobilenet_v2",
          [norm_eps("features.1.conv.0.1", "conv_stem.conv_3x3", value=1e-3)],
          # each inverted residual block is the Paddle block, not its conv branch (the two hold the same tensors)
          name_map=[(rf"^mobilenet_v2\.layer\.{i}$", f"features.{i + 2}") for i in range(16)],
          train_mode=False),  # batch statistics of 2 images at 1 x 1 are rounding noise: Step 4 in eval mode
    model("LSTM (torch / paddle)", "lstm",
          [{"name": "gates i, g, f, o", "gates": [("weight_ih_l0", [0, 2, 1, 3])], "step": 1, "where": "",
            "cause": "torch packs the gates i, f, g, o"}]),
    model("GRU (torch / paddle)", "gru",
          [{"name": "gates z, r, n", "gates": [("weight_hh_l0", [1, 0, 2])], "step": 1, "where": "",
            "cause": "torch packs the gates r, z, n"}]),
    # torch packs q, k, v in in_proj_weight, Paddle splits them: portcheck.mapping.recipes.TORCH_ATTENTION (Fused,
    # output=False)
    model("TransformerEncoder (torch / paddle)", "transformer encoder",
          [{"name": "pre-norm for post-norm", "config": {"normalize_before": True}, "step": (1, 4), "where": "layers.0",
            "cause": "normalize_before=True (torch's norm_first=False)"},
           {"name": "q and k swapped in the split", "config": {"split": ("k_proj", "q_proj", "v_proj")},
            "step": (1, 4), "where": "layers.0.self_attn",
            "cause": "the layout declares in_proj's rows k, q, v: Paddle's k_proj filled with torch's q rows"},
           {"name": "in_proj's q rows left [out, in]", "transpose": ["layers.1.self_attn.q_proj.weight"],
            "step": (1, 4), "where": "layers.1.self_attn",
            "cause": "a packed weight split without the Linear's transpose"},
           norm_eps("layers.0.norm2", "layers.0.norm2", value=1e-6)],  # torch's 1e-5, Paddle's default too
          fast=True),  # in the suite: torch's out_proj and q/k/v parts, never called, are paired by their names
    model("CNN, conv bias before BatchNorm", "cnn",
          [norm_eps("1", "1", value=1e-3),
           {"name": "BatchNorm momentum 0.1 (torch's value, Paddle's convention is 1 - it)",
            "config": {"bn_momentum": 0.1}, "step": 4, "where": "1.running_mean",
            "cause": "Paddle's momentum weighs the running statistic, torch's the batch"}],
          config={"gelu": "none"}),
    model("CNN with Dropout (eval)", "cnn",
          [{"name": "Dropout downscale_in_infer", "config": {"dropout_mode": "downscale_in_infer"}, "step": 1,
            "where": "3", "cause": "Paddle's other dropout mode scales at evaluation"}],
          config={"gelu": "none", "dropout": 0.3}, steps=(1,)),
    model("CNN with GELU exact", "cnn",
          [{"name": "GELU tanh", "config": {"paddle_gelu_tanh": True}, "step": 1, "where": "5",
            "cause": "the tanh approximation"}], config={"gelu": "none"}, steps=(1,)),
    model("CNN with GELU tanh", "cnn",
          [{"name": "GELU exact", "config": {"paddle_gelu_tanh": False}, "step": 1, "where": "5",
            "cause": "the exact GELU for the tanh approximation"}], config={"gelu": "tanh"}, steps=(1,)),
]

CASES += MODELS


# ---- torchvision against paddle.vision: each classification model with a counterpart of the same name ----
# Plants: an activation swapped (behind torchvision's in-place ReLUs) and one BatchNorm's epsilon, each at one module;
# "fix": what paddle.vision's model does otherwise than torchvision's, set as a port sets it (the plant that leaves it
# is red at its module).
def act(path, where, to="LeakyReLU"):
    return {"name": f"{path} as {to}", "module": [(path, to)], "step": (1, 4), "where": where,
            "cause": "another activation in one place"}


def vision(name, plants, **more):
    return model(f"{name} (torchvision / paddle.vision)", f"torchvision {name}", plants, **more)


# paddle.vision's BatchNorm momentum 0.9 is torch's 0.1, their default alike; epsilon 1e-5 alike except inception's
TORCHVISION = [
    vision("alexnet", [act("_conv1.relu", "features.1"),
                       {"name": "Dropout left in paddle.vision's downscale_in_infer mode",
                        "set": [("_drop1", "mode", "downscale_in_infer"), ("_drop2", "mode", "downscale_in_infer")],
                        "step": 1, "where": "classifier.0", "cause": "Dropout's downscale mode: x (1 - p) in eval"}],
           fix=[("_drop1", "mode", "upscale_in_train"), ("_drop2", "mode", "upscale_in_train")]),
    # its correct port green in compare_backward by torch's run against itself sending a max pooling's tie the other
    # way (backward._ties_other_way): Paddle's kernel takes the other of one window tied in torch's fp32 run
    vision("vgg11", [act("features.1", "features.1")]),
    vision("resnet18", [act("layer1.0.relu", "layer1.0.relu"), norm_eps("layer1.0.bn1", "layer1.0.bn1", 1e-3)]),
    vision("resnext50_32x4d", [act("layer1.0.relu", "layer1.0.relu"), norm_eps("layer1.0.bn2", "layer1.0.bn2", 1e-3),
                               {"name": "one BatchNorm's momentum 0.1, torch's value", "set": [("layer1.0.bn2",
                                                                                                 "_momentum", 0.1)],
                                "step": 4, "where": "layer1.0.bn2", "cause": "Paddle's momentum weighs the running "
                                "statistic, torch's the batch: torch's 0.1 is Paddle's 0.9"}]),
    vision("wide_resnet50_2", [act("layer1.0.relu", "layer1.0.relu"),
                               norm_eps("layer1.0.bn2", "layer1.0.bn2", 1e-3)]),
    vision("densenet121", [norm_eps("conv1_func._batch_norm", "features.norm0", 1e-3),
                           {"name": "norm0's activation tanh", "set": [("conv1_func._batch_norm", "_act",
                                                                              "tanh")],
                            "step": (1, 4), "where": "features.norm0", "cause": "another activation in one place"},
                           # torchvision applies this ReLU in DenseNet.forward, outside any module (pairing._applied)
                           {"name": "norm5's activation left out", "set": [("batch_norm", "_act", None)], "step": 1,
                            "where": "features.norm5", "cause": "no ReLU where torch's forward applies F.relu"}]),
    vision("shufflenet_v2_x1_0", [act("_conv1.2", "conv1.2"), norm_eps("_conv1.1", "conv1.1", 1e-3)]),
    # ReLU6 planted as ReLU is invisible here: no value of a random-init forward reaches 6
    vision("mobilenet_v2", [act("features.0.2", "features.0.2"), norm_eps("features.0.1", "features.0.1", 1e-3)]),
    # torchvision's MobileNetV3 builds its BatchNorms with eps 0.001, paddle.vision's too: the plant is torch's default
    vision("mobilenet_v3_small", [act("conv.2", "features.0.2", "ReLU"), norm_eps("conv.1", "features.0.1", 1e-5)]),
    vision("inception_v3", [{"name": "BatchNorm epsilon left at paddle.vision's 1e-5", "eps_all": 1e-5, "step": 1,
                             "where": "Conv2d_1a_3x3.bn", "cause": "torchvision's BasicConv2d has eps 0.001"}],
           eps_all=1e-3, fix=[("dropout", "mode", "upscale_in_train"), ("dropout", "p", 0.5)]),
    vision("squeezenet1_1", [], skip="paddle.vision's squeezenet1_1 first conv is another shape than torchvision's "
           "(portcheck.convert says both): not the same model"),
    vision("googlenet", [], skip="paddle.vision's googlenet is the original network without BatchNorm; "
           "torchvision's has one in every conv: not the same model"),
]
CASES += TORCHVISION

# ---- Step 2: loaders (sklearn's wine, 178 samples, batches of 16) ----
LOADER = {"check": "loader", "group": "loader", "steps": (2,), "fast": True}
LOADERS = [
    {**LOADER, "name": "loader, a sampler of the user's", "torch": {"sampler": "ascending"},
     "paddle": {"sampler": "ascending"},
     "plants": [{"name": "sampler sorted the other way", "paddle": {"sampler": "descending"}, "step": 2,
                 "where": "batch 0", "cause": "another order"},
                {"name": "each framework's own shuffle for the shared order", "paddle": {"shuffle": True,
                                                                                     "sampler": None}, "step": 2,
                 "where": "batch 0", "cause": "Paddle's generator draws another order than torch's"}]},
    {**LOADER, "name": "loader, drop_last, every batch", "torch": {"drop_last": True}, "paddle": {"drop_last": True},
     "plants": [{"name": "drop_last left out", "paddle": {"drop_last": False}, "step": 2, "where": "batch",
                 "cause": "the last partial batch kept"}]},
    {**LOADER, "name": "loader, drop_last, 3 batches recorded", "torch": {"drop_last": True},
     "paddle": {"drop_last": True}, "batches": 3,
     "plants": [{"name": "drop_last left out", "paddle": {"drop_last": False}, "step": 2, "where": "batch",
                 "cause": "the last partial batch kept"}]},
    {**LOADER, "name": "loader, a collate function", "torch": {"collate": True}, "paddle": {"collate": True},
     "plants": [{"name": "padded with 1", "paddle": {"pad": 1.0}, "step": 2, "where": "batch 0, key features",
                 "cause": "another pad value"}]},
]

# ---- Step 5: training, each side's own loop (wine, an MLP; digits, a CNN) ----
TRAIN = {"check": "training", "group": "training", "steps": (5,), "fast": False, "train": 128, "test": 50,
         "epochs": 3, "lr": 0.05, "weight_decay": 1e-3, "optimizer": "SGD"}
TRAININGS = [
    {**TRAIN, "name": "training, BatchNorm, momentum SGD", "torch": {"batchnorm": True}, "paddle": {"batchnorm": True},
     "plants": [{"name": "weight decay left out", "paddle": {"weight_decay": 0.0}, "step": 5, "where": "weight norm",
                 "cause": "no weight decay"},
                {"name": "BatchNorm momentum 0.1", "paddle": {"bn_momentum": 0.1}, "step": 5, "where": "",
                 "cause": "Paddle's momentum weighs the running statistic, torch's the batch"}]},
    {**TRAIN, "name": "training, conv bias before BatchNorm, AdamW", "torch": {"cnn": True}, "paddle": {"cnn": True},
     "train": 320, "test": 200, "epochs": 2, "lr": 0.01, "weight_decay": 0.01, "optimizer": "AdamW",
     "plants": [{"name": "weight decay left at 0", "paddle": {"weight_decay": 0.0}, "step": 5, "where": "weight norm",
                 "cause": "no weight decay"},
                {"name": "BatchNorm momentum 0.1", "paddle": {"bn_momentum": 0.1}, "step": 5, "red": ["train_align"],
                 "where": {"train_align": "train_align", "training curves": "final metric"},
                 "cause": "Paddle's momentum weighs the running statistic, torch's the batch"},
                {"name": "paddle.optimizer.Adam for AdamW", "paddle": {"optimizer": "Adam"}, "step": 5,
                 "where": "weight norm", "cause": "Adam's weight_decay is L2 added to the gradient, not AdamW's "
                                                  "decay of the weights"}]},
    {**TRAIN, "name": "training, each framework's own dropout masks", "torch": {"dropout": 0.1},
     "paddle": {"dropout": 0.1}, "plants": []},
    {**TRAIN, "name": "training, shared dropout masks", "torch": {}, "paddle": {}, "shared_masks": 0.2,
     "plants": [{"name": "masks not rescaled", "paddle": {"scaled": False}, "step": 5, "where": "first step's loss",
                 "cause": "the kept units not scaled by 1 / (1 - p)"}]},
]

CASES += LOADERS + TRAININGS

# ---- habits many library models share, each a pair of the zoo's own making (checks/habits.py) ----
HABITS = [model(f"habit: {kind}", "habit", plants, config={"habit": kind}, **more)
          for kind, plants, more in [
              ("float64 overflow", [norm_eps("norm", "norm", value=1e-12)], {}),
              ("integer computations", [{
                  "name": "another bucket width", "config": {"paddle_bucket_width": 3}, "step": 1,
                  "where": {"forward, every module": "buckets", "forward, each module isolated": "(model)"},
                  "red": ["forward, each module isolated"], "cause": "relative positions bucketed by 3, not 2"}], {}),
              ("buffer one side keeps", [{
                  "name": "position ids from 1", "config": {"paddle_position_start": 1}, "step": (1, 4),
                  "where": "positions", "cause": "the saved position_ids off by one"}],
               {"keep": ["position_ids"]}),
              ("tied embeddings", [], {}),
              ("flattened batches", [{
                  "name": "encoder and decoder feed-forward weights swapped",
                  "swap": [("encoder.fc1.weight", "decoder.fc1.weight")], "step": (1, 4), "where": "encoder.fc1",
                  "cause": "a conversion that filled one half's fc1 with the other's"}], {}),
              ("subclassed embeddings", [{
                  "name": "position embedding with padding_idx 0", "set": [("positions", "_padding_idx", 0)],
                  "step": (1, 4), "where": "positions", "cause": "position 0's row read as zeros"}], {}),
              ("config difference", [{
                  "name": "type_vocab_size left at paddlenlp's default", "config": {"paddle_type_vocab_size": 16},
                  "step": 1, "where": "token_type", "refused": "the two models' configs differ",
                  "cause": "token-type embeddings [16, 16] for torch's [2, 16]: the configs differ, no map fixes it"}],
               {})]]

CASES += HABITS
