"""transformers 5's Qwen3 against paddleformers' port, each built from one tiny config with random weights, checked
with no name map and no layouts: paddleformers' fused qkv_proj and up_gate_proj settled by convert's run, every
module compared (isolated too); then the port built with another rms_norm_eps, which must be red at the first norm.

    .venv-formers/bin/python examples/formers_pair.py     # exit 0: the clean pair green and the planted bug red

Runs in the PaddleFormers environment (requirements-formers.txt: paddleformers beside transformers 5); writes
nothing. paddleformers imports paddlefleet, which is not on PyPI: fleet.prepare() puts stand-ins for its two modules
and imports torch before paddleformers, which otherwise hides torch from transformers.
"""
import argparse
import importlib.util

import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch and Paddle load)
from portcheck.checkpoints import fleet
from portcheck.core.errors import run_main

CONFIG = dict(vocab_size=99, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=64, use_cache=False, rms_norm_eps=1e-6)


def pair(**port_config):
    import torch
    from paddleformers.transformers.qwen3 import configuration as pf_config, modeling as pf
    from transformers.models.qwen3 import configuration_qwen3 as hf_config, modeling_qwen3 as hf
    torch.manual_seed(0)
    pt = hf.Qwen3Model(hf_config.Qwen3Config(**CONFIG)).eval()
    pd = pf.Qwen3Model(pf_config.Qwen3Config(**{**CONFIG, **port_config}, fuse_rms_norm=False))  # no CPU kernel fused
    pd.eval()
    return pt, pd


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    if importlib.util.find_spec("paddleformers") is None:
        raise SystemExit("error: paddleformers is not installed here: run this with the PaddleFormers environment's "
                         "Python (.venv-formers, pip install -r requirements-formers.txt)")
    fleet.prepare()  # before either library's model is imported
    import numpy as np
    from portcheck import compare_forward, convert
    ids = np.random.RandomState(0).randint(0, CONFIG["vocab_size"], (2, 8)).astype("int64")
    pt, pd = pair()
    state = convert(pt, pd, inputs=ids)  # no name map, no layouts
    print(state.said)                    # each fused layout, which modules, and the run that settled it
    forward = compare_forward(pt, pd, ids, layouts=state.fused_found, isolate=True)
    print(f"clean pair: forward {'green' if forward.passed else 'RED'} ({len(forward.paired)} outputs compared)")
    pt, pd = pair(rms_norm_eps=1e-5)     # the bug: the port's config spells another epsilon
    state = convert(pt, pd, inputs=ids)
    planted = compare_forward(pt, pd, ids, layouts=state.fused_found, isolate=True)
    print(f"rms_norm_eps 1e-5 in the port: {'green' if planted.passed else 'RED'}, first diverging "
          f"{planted.first_diverging}")
    if not forward.passed or planted.passed:
        raise SystemExit(1)


if __name__ == "__main__":
    run_main(main)
