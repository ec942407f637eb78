"""python -m portcheck generate: a transformers Llama checkpoint folder and its paddlenlp port's, each model loaded
whole as `layers` builds and fills its skeletons (portcheck.checkpoints.stream: the config checked against the shards,
every tensor matched by name and shape), decoding the same prompt step by step with their caches
(compare_generate); one line per step, the first parting step and module named.

    python -m portcheck generate --torch hf_llama/ --paddle pd_llama/ --prompt-ids prompt.npy --new-tokens 8
"""
from pathlib import Path

import numpy as np

from portcheck.core.errors import PipelineError
from portcheck.checkpoints import stream


def loaded(torch_dir, paddle_dir) -> tuple:
    """(torch's model, Paddle's), each built from its folder's config and filled from its shards in float32, eval
    mode: stream's skeletons, every block loaded."""
    shards = {"torch": stream.Shards(torch_dir, "torch"), "paddle": stream.Shards(paddle_dir, "paddle")}
    t_model, p_model = stream.torch_skeleton(torch_dir), stream.paddle_skeleton(paddle_dir)
    tied = {"lm_head.weight": "model.embed_tokens.weight"} if getattr(t_model.config, "tie_word_embeddings", 0) else {}
    t_names = stream._matched(shards["torch"], stream._torch_expected(t_model), tied)
    p_names = stream._matched(shards["paddle"], stream._paddle_expected(p_model), {})
    t_blocks, p_blocks = stream.blocks(t_model, "torch"), stream.blocks(p_model, "paddle")
    if len(t_blocks) != len(p_blocks):
        raise PipelineError(f"the torch model has {len(t_blocks) - 3} decoder layers, the Paddle one "
                            f"{len(p_blocks) - 3}: the two configs differ [PC662]")
    for (_, t_path), (_, p_path) in zip(t_blocks, p_blocks):
        stream._load_torch(t_model, t_path, shards["torch"], t_names, "cpu")
        stream._load_paddle(p_model, p_path, shards["paddle"], p_names)
    return t_model.eval(), p_model.eval()


def add_parser(sub):
    p = sub.add_parser("generate", help="a Llama checkpoint and its Paddle port's, decoding step by step with their "
                       "caches", allow_abbrev=False, description=__doc__,
                       formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--torch", required=True, type=Path, metavar="DIR", help="transformers' checkpoint folder "
                   "(config.json, safetensors shards)")
    p.add_argument("--paddle", required=True, type=Path, metavar="DIR", help="paddlenlp's checkpoint folder, saved "
                   "with save_pretrained(..., safe_serialization=True)")
    p.add_argument("--prompt-ids", required=True, type=Path, metavar="FILE.npy", help="the prompt's token ids, an "
                   "integer array [batch, length] or [length] (np.save, no pickle)")
    p.add_argument("--new-tokens", type=int, default=8, metavar="N", help="steps to decode (default 8)")
    p.add_argument("--table", action="store_true", help="also print the first parting step's call module by module")
    return p


def main(args) -> int:
    from portcheck.core.fileio import load_array
    from portcheck.generation.generate import compare_generate
    ids = load_array(args.prompt_ids, "give the prompt's token ids, an integer array saved with np.save")
    ids = ids[None] if ids.ndim == 1 else ids
    if ids.ndim != 2 or ids.dtype.kind not in "iu" or not ids.size:
        raise PipelineError(f"--prompt-ids {args.prompt_ids}: {ids.dtype}{list(ids.shape)}, give an integer array "
                            "[batch, length] [PC663]")
    if args.new_tokens < 1:
        raise PipelineError(f"--new-tokens {args.new_tokens}: give the number of steps to decode, 1 or more [PC664]")
    torch_model, paddle_model = loaded(args.torch, args.paddle)
    report = compare_generate(torch_model, paddle_model, np.asarray(ids, np.int64), max_new_tokens=args.new_tokens)
    print(report.table() if args.table else "\n".join(report.lines()))
    return 0 if report.passed else 1
