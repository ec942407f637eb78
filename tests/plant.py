"""Run a pipeline script with one realistic bug planted, to prove a check can go red.

    python tests/plant.py BUG path/to/script.py [script args...]

The bug is planted by patching the imported code in this process before the
script runs; no file in the repository is touched. Bugs for later steps live in
tests/plants_*.py, registered with the same @plant decorator.
"""
import runpy
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

PLANTS = {}


def plant(name):
    def register(fn):
        PLANTS[name] = fn
        return fn
    return register


def after_build(framework, mutate):
    """Wrap twins.weights.<framework>_model so mutate(model) runs on every model it builds."""
    from bert_sst2.twins import weights
    original = getattr(weights, f"{framework}_model")

    def build(*args, **kwargs):
        model = original(*args, **kwargs)
        mutate(model)
        return model
    setattr(weights, f"{framework}_model", build)


@plant("paddle_ln_eps")
def _():
    """Paddle LayerNorms built with Paddle's default epsilon 1e-5 instead of the config's 1e-12."""
    import paddle
    after_build("paddle", lambda m: [setattr(l, "_epsilon", 1e-5) for l in m.sublayers()
                                     if isinstance(l, paddle.nn.LayerNorm)])


@plant("paddle_layer3_attention_ln_eps")
def _():
    """Only encoder layer 3's attention-output LayerNorm built with Paddle's default epsilon."""
    after_build("paddle", lambda m: setattr(m.bert.encoder.layer[3].attention.output.LayerNorm, "_epsilon", 1e-5))


@plant("paddle_untransposed_query")
def _():
    """A converter that skipped one square Linear: layer 0's query weight left in torch layout."""
    import paddle

    def untranspose(model):
        w = model.bert.encoder.layer[0].attention.self.query.weight
        w.set_value(paddle.transpose(w, [1, 0]))
    after_build("paddle", untranspose)


@plant("paddle_layer0_backward_scaled")
def _():
    """A backward-only bug (as in a hand-written backward): the gradient flowing back out of encoder
    layer 0 is scaled by 1.01. The forward pass is untouched; layer 0 and the embeddings get wrong gradients."""
    def scale_backward(model):
        layer = model.bert.encoder.layer[0]
        forward = layer.forward

        def scaled(*args, **kwargs):
            out = forward(*args, **kwargs)
            out.register_hook(lambda grad: grad * 1.01)
            return out
        layer.forward = scaled
    after_build("paddle", scale_backward)


@plant("paddle_no_mask")
def _():
    """The reference bug: the extended mask is computed but never reaches the encoder."""
    from models import pd_bert
    forward = pd_bert.BertEncoder.forward
    pd_bert.BertEncoder.forward = lambda self, h, mask, *a: forward(self, h, mask * 0, *a)


def load_all():
    # plants_*.py (beside this file, so importable as this file is) register into this very registry,
    # also when this file runs as __main__
    import importlib
    sys.modules.setdefault("plant", sys.modules[__name__])
    for path in sorted(TESTS.glob("plants_*.py")):
        importlib.import_module(path.stem)


if __name__ == "__main__":
    load_all()
    bug, script = sys.argv[1], sys.argv[2]
    if bug not in PLANTS:
        sys.exit(f"error: unknown bug {bug!r}; known: {', '.join(sorted(PLANTS))}")
    PLANTS[bug]()
    sys.argv = sys.argv[2:]
    runpy.run_path(script, run_name="__main__")
