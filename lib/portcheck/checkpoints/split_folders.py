"""A tensor-parallel comparison from checkpoint folders: paddlenlp's own split of a checkpoint as each rank's weights
(Pretrained, a build calling from_pretrained(folder, tensor_parallel_degree=, tensor_parallel_rank=)), a folder split
for another degree refused before any rank starts (checked_folder), and `python -m portcheck layers --tp N` (main):
a transformers Llama folder against a single-card paddlenlp Llama folder split across N ranks by paddlenlp, judged by
compare_split (cumulative and isolated), one line per block. Unlike `layers` without --tp, the models are whole:
torch's in this process, each rank's shard in its own. Imports core, parallel's split and this package's checkpoint
and stream;
torch, transformers, Paddle and paddlenlp inside its functions."""
import re
from pathlib import Path

from portcheck.checkpoints import checkpoint, stream
from portcheck.core.errors import PipelineError
from portcheck.parallel import split

TP = "tensor_parallel_degree"
TP_FILE = re.compile(r"\.tp(\d{2})(?:_pp\d{2})?\.")  # a rank's file of a checkpoint paddlenlp saved split: .tp01.


class Pretrained:
    """build(rank, degree) for compare_split: model_class.from_pretrained(folder, tensor_parallel_degree=degree,
    tensor_parallel_rank=rank, **settings), paddlenlp's own split of the folder's checkpoint on each rank (its
    _get_tensor_parallel_mappings: a fused q/k/v per part). Its folder is checked before any rank starts
    (compare_split calls checked(degree)): a checkpoint split for another degree is one line."""

    def __init__(self, model_class, folder, **settings):
        # the class by its name: each rank imports it when it builds, after its process group is set up (a library
        # imported as the rank's arguments are read, before that, leaves every rank rank 0)
        self.model_class = (model_class.__module__, model_class.__qualname__)
        self.folder, self.settings = str(folder), settings

    def __call__(self, rank, degree):
        import importlib
        model_class = getattr(importlib.import_module(self.model_class[0]), self.model_class[1])
        return model_class.from_pretrained(self.folder, tensor_parallel_degree=degree, tensor_parallel_rank=rank,
                                           **self.settings)

    def checked(self, degree):
        checked_folder(self.folder, degree)

    def __repr__(self):
        return f"Pretrained({self.model_class[1]}, {self.folder!r})"


def split_for(folder) -> tuple:
    """(the ranks the folder's checkpoint is split for, 1 for a single card; the files or setting that say so)."""
    folder = Path(folder)
    said = checkpoint.read_config(folder, split=(TP,)).get(TP)
    files = sorted(p.name for p in folder.iterdir() if TP_FILE.search(p.name)) if folder.is_dir() else []
    ranks = {int(TP_FILE.search(name).group(1)) for name in files}
    if isinstance(said, int) and said > 1:
        return said, f"its config.json's {TP} {said}"
    if ranks:
        return max(ranks) + 1, f"its files {', '.join(files[:2])}" + (f" and {len(files) - 2} more" * (len(files) > 2))
    return 1, ""


def checked_folder(folder, degree: int):
    """A checkpoint folder each of `degree` ranks can load its shard of: a single-card one (paddlenlp splits it as
    it loads) or one split for `degree` ranks; else one line, before any rank starts."""
    ranks, why = split_for(checkpoint.a_folder(folder, "paddle"))
    if ranks > 1 and ranks != degree:
        raise PipelineError(f"{folder}: a checkpoint split for {ranks} ranks ({why}), not {degree}: each of its files "
                            f"holds one rank's shard of {ranks}; give degree {ranks}, or the single-card checkpoint "
                            "(save_pretrained(..., merge_tensor_parallel=True) writes one) [PC927]")


# ---------------------------------------------------------------- python -m portcheck layers --tp N

def torch_from_folder(folder):
    """transformers' LlamaForCausalLM from a folder's safetensors (no pickle read), float32, eager attention."""
    import torch
    from transformers import LlamaForCausalLM
    return LlamaForCausalLM.from_pretrained(str(folder), torch_dtype=torch.float32, attn_implementation="eager",
                                            use_safetensors=True, local_files_only=True).eval()


def block_of(name: str):
    """A torch row's block (stream's blocks: the embeddings, each decoder layer, the final norm, the head), or
    None (the model's own output, judged in the last line)."""
    embed, layers, norm, head = checkpoint.PATHS["torch"]
    name = re.split(r"[\[#:]", name)[0]  # a call's output (model.layers.0[0], lm_head#2): its module's
    if name.startswith(layers + "."):
        return ".".join(name.split(".")[:len(layers.split(".")) + 1])
    return next((b for b in (embed, norm, head) if name == b or name.startswith(b + ".")), None)


def first_red(report, block_of) -> dict:
    """{block: {"cumulative": its first red row or None, "isolated": the same}}, blocks in the order the rows
    meet them (block_of: a torch row's block, or None for the model's own output)."""
    blocks = {}
    for how, rows in (("cumulative", report.paired), ("isolated", report.isolated or [])):
        for row in rows:
            block = block_of(row.name)
            if block is not None:
                red = blocks.setdefault(block, {"cumulative": None, "isolated": None})
                if red[how] is None and not row.passed:
                    red[how] = row
    return blocks


def block_lines(report, blocks=block_of) -> list:
    """One line per block: cumulative (each rank's part gathered, each module on the model's run) and isolated
    (each module on torch's values), the first module red in it named with the ranks where it parts. blocks: a
    torch row's block (block_of, the paddlenlp Llama's names)."""
    out = []
    for block, reds in first_red(report, blocks).items():
        said = []
        for how, red in reds.items():
            ranks = ", ".join(map(str, report.ranks.get(red.name, range(report.degree)))) if red else ""
            said.append(f"{how} green" if red is None else f"{how} RED at {red.name} on rank {ranks} [PC929]")
        out.append(f"{block}: {', '.join(said)}")
    return out


def checked_flags(args) -> int:
    """--tp's degree, 2 or more, and --device the CPU's (the torch model whole in this process); else one line."""
    if args.tp < 2:
        raise PipelineError(f"--tp {args.tp}: give the ranks the Paddle model is split across, 2 or more (without "
                            "--tp, layers compares it whole) [PC928]")
    if args.device != "cpu":
        raise PipelineError(f"--device {args.device}: with --tp the torch model runs whole in this process on the CPU; "
                            "leave --device out [PC930]")
    return args.tp


def main(args) -> int:
    """`layers --tp N`: the torch folder's model in this process, the Paddle folder's split across N ranks by
    paddlenlp's from_pretrained, judged by compare_split with isolate=True; a line per block, then the verdict."""
    degree = checked_flags(args)
    checked_folder(args.paddle, degree)
    if getattr(args, "html", None) is not None:  # checked before the ranks start
        from portcheck.core import page
        page.writable_page(args.html)
    sizes = {"torch": stream.folder_sizes(args.torch, "torch"), "paddle": stream.folder_sizes(args.paddle, "paddle")}
    if args.ids is not None:
        from portcheck.core.fileio import load_array
        ids = load_array(args.ids, "give an integer array saved with np.save")
    else:
        ids = stream.tokens_flag(args.tokens, stream.held(sizes))
    ids = stream.checked_tokens(stream.checked_ids(ids), sizes)
    from paddlenlp.transformers import LlamaForCausalLM
    build = Pretrained(LlamaForCausalLM, Path(args.paddle).resolve(), tensor_parallel_output=False, dtype="float32")
    report = split.compare_split(torch_from_folder(args.torch), build, {"input_ids": ids}, degree, isolate=True)
    lines = shown(report, args, block_of)
    print(f"{len(lines)} blocks split across {degree} ranks: " + (
        "green, cumulative and isolated" if report.passed else f"RED: {parted(report, block_of)} [PC931]"))
    return 0 if report.passed else 1


def shown(report, args, blocks) -> list:
    """A split comparison's lines as `layers --tp` prints them for any folders, before its verdict: one per block
    (returned), the table or the split line, --plot, --html."""
    lines = block_lines(report, blocks)
    print("\n".join(lines))
    print(report.table() if args.table else report.split_line())
    if args.plot:
        print(report.plot(args.plot))
    if getattr(args, "html", None) is not None:
        print(report.html(args.html))
    return lines


def parted(report, blocks) -> str:
    """Where a red split comparison parts: its first module and block, the ranks, torch's input, a stopped rank."""
    first = report.first_diverging
    return (f"first diverging {first} (block {blocks(str(first)) if first is not None else None}) on rank "
            f"{', '.join(map(str, report.parted()))}; on torch's input: "
            f"{report.differing[0] if report.differing else None}"
            + (f"; the Paddle model stopped on rank {', '.join(map(str, report.stop_ranks))}: "
               f"{report.stopped['paddle']}" if report.stop_ranks else ""))
