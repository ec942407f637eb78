"""`python -m portcheck layers --tp N` on PaddleFormers checkpoint folders: transformers' folder's model whole in this
process, paddleformers' folder loaded by paddleformers itself in each of N tensor-parallel ranks
(`from_pretrained` with tensor_model_parallel_size N: its flex checkpoint cuts each rank's shard as it loads), judged
by parallel's compare_split (cumulative and isolated), one line per block naming the ranks where a module parts.

    python -m portcheck layers --torch qwen3-hf/ --paddle qwen3-pd/ --tp 2

The classes, the base models where a causal LM needs paddlefleet, and the port's layouts are formers_folders' (its
qkv_proj per key-value group: each rank holds its groups, each group as the whole does). Unlike `layers` without
--tp, the Paddle model is N processes' shards. Imports core, parallel's split and this package's fleet,
formers_folders and split_folders; torch, transformers, Paddle and paddleformers inside its functions.
"""
import importlib

from portcheck.checkpoints import fleet, formers_folders, split_folders
from portcheck.parallel import split


class Formers:
    """build(rank, degree) for compare_split: paddleformers' class from_pretrained on the folder, its config's
    tensor_model_parallel_size the degree, in the rank's process (formers_folders.paddle_loaded). The class by its
    name: each rank imports it after its process group is set up, paddlefleet's stand-ins put first (fleet)."""

    def __init__(self, p_class, folder, convert_from_hf: bool = False):
        self.p_class = (p_class.__module__, p_class.__qualname__)
        self.folder, self.convert_from_hf = str(folder), convert_from_hf

    def __call__(self, rank, degree):
        fleet.prepare()
        p_class = getattr(importlib.import_module(self.p_class[0]), self.p_class[1])
        return formers_folders.paddle_loaded(p_class, self.folder, self.convert_from_hf, degree=degree, rank=rank)

    def __repr__(self):
        return f"Formers({self.p_class[1]}, {self.folder!r})"


def compare(torch_dir, paddle_dir, ids, degree: int, convert_from_hf: bool = False) -> tuple:
    """(compare_split's report of the torch folder's model against the Paddle folder's split across `degree` ranks
    by paddleformers, isolate=True; the lines said about how they were loaded). ids: token ids [batch, length]."""
    t_class, p_class, t_folder, p_folder, said = formers_folders.classes(torch_dir, paddle_dir)
    if convert_from_hf:
        said.append(f"the Paddle model: paddleformers' {p_class.__name__}.from_pretrained(folder, convert_from_hf="
                    "True) on each rank")
    t_model = formers_folders.torch_loaded(t_class, t_folder)
    formers_folders.checked_vocab(ids, t_model.config.vocab_size)
    build = Formers(p_class, p_folder.resolve(), convert_from_hf)
    report = split.compare_split(t_model, build, {"input_ids": ids}, degree, isolate=True,
                                 layouts=formers_folders.port_layouts(t_model.config, t_model))
    return report, said


def main(args) -> int:
    """`layers --tp N` on a PaddleFormers folder: a line per block, the split's line, then the verdict."""
    degree = split_folders.checked_flags(args)
    formers_folders.prepared()
    if getattr(args, "html", None) is not None:  # checked before the ranks start
        from portcheck.core import page
        page.writable_page(args.html)
    report, said = compare(args.torch, args.paddle, formers_folders.ids_of(args), degree, args.convert_from_hf)
    for line in said:
        print(line)
    lines = split_folders.shown(report, args, formers_folders.block_of)
    print(f"{len(lines)} blocks, the Paddle folder loaded by paddleformers split across {degree} ranks: " + (
        "green, cumulative and isolated" if report.passed else
        f"RED: {split_folders.parted(report, formers_folders.block_of)} [PC940]"))
    return 0 if report.passed else 1
