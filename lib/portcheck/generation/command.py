"""python -m portcheck generate: a transformers checkpoint folder of a model that generates and its Paddle port's,
each model the class its config.json names, built from that config and filled from its safetensors shards
(portcheck.checkpoints.family_folders: every tensor matched by name and shape; a PaddleFormers folder loaded by
paddleformers), decoding the same prompt step by step with their caches, each fed as its own library's generate
feeds it (compare_generate); one line per step, the first parting step and module named.

    python -m portcheck generate --torch gpt2-hf/ --paddle gpt-pd/ --prompt-ids prompt.npy --new-tokens 8
"""
from pathlib import Path

import numpy as np

from portcheck.core.errors import PipelineError
from portcheck.checkpoints import family_folders, formers_folders


def add_parser(sub):
    p = sub.add_parser("generate", help="a checkpoint of a model that generates and its Paddle port's, decoding "
                       "step by step with their caches", allow_abbrev=False, description=__doc__,
                       formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--torch", required=True, type=Path, metavar="DIR", help="transformers' checkpoint folder "
                   "(config.json, safetensors shards)")
    p.add_argument("--paddle", required=True, type=Path, metavar="DIR", help="paddlenlp's (or paddleformers') "
                   "checkpoint folder, saved with save_pretrained(..., safe_serialization=True)")
    p.add_argument("--prompt-ids", required=True, type=Path, metavar="FILE.npy", help="the prompt's token ids, an "
                   "integer array [batch, length] or [length] (np.save, no pickle)")
    p.add_argument("--attention-mask", type=Path, metavar="FILE.npy", help="1 at each prompt token, 0 at its left "
                   "padding, shaped as the prompt's ids (np.save): a batch of prompts of other lengths")
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
    if formers_folders.is_formers(args.paddle):
        import importlib.util
        if importlib.util.find_spec("paddleformers") is None:
            raise PipelineError(f"{args.paddle} is a PaddleFormers folder and paddleformers is not installed here: run "
                                "generate in the PaddleFormers environment (pip install -r "
                                "requirements-formers.txt) [PC357]")
        from portcheck.checkpoints import fleet
        fleet.prepare()  # before transformers is imported: the order paddleformers and transformers 5 import in
    mask = None
    if args.attention_mask is not None:
        mask = load_array(args.attention_mask, "give the prompt's mask, an integer array saved with np.save")
        mask = mask[None] if mask.ndim == 1 else mask
    torch_model, paddle_model = family_folders.loaded(args.torch, args.paddle)
    report = compare_generate(torch_model, paddle_model, np.asarray(ids, np.int64), max_new_tokens=args.new_tokens,
                              attention_mask=mask)
    print(report.table() if args.table else "\n".join(report.lines()))
    return 0 if report.passed else 1
