"""One tensor held on two levels: a torch module holding a tensor itself that its Linear child holds too (transformers'
LM heads hold their bias and tie decoder.bias to it, the decoder's weight tied to the embedding), against a Paddle
module holding the child's tensors as bare parameters of its own (paddlenlp's decoder_weight and decoder_bias). Where
portcheck.mapping.loose pairs the child's tensors with the Paddle module's bare ones, the parent's own is that same
tensor: taken out of the parent's description in the records (held_twice), so that the two modules pair, and filled
where the child's fills (on_two_levels), once.

May import portcheck.core; torch only through the model handed in."""
from dataclasses import replace


def held_twice(mine: dict, child: dict, theirs: dict, dropped) -> list:
    """[(a tensor a torch module holds itself, its taken Linear child's tensor of that shape)] (mine, child: {name:
    shape}) that its Paddle counterpart, holding the child's tensors bare (theirs, less `dropped`: those taken), holds
    once: each of the child's shapes torch's module holds and Paddle's holds no more of. Read from records (shapes,
    no identity): a tensor of those shapes that is not the child's is no tie, and convert, reading the live tensors,
    finds no place for it."""
    left = list(theirs.values())
    for shape in dropped:
        if shape in left:
            left.remove(shape)
    own, out = dict(mine), []
    for its, shape in child.items():
        same = next((name for name, s in own.items() if s == shape), None)
        if same is not None and shape not in left:
            del own[same]
            out.append((same, its))
    return out


def on_two_levels(torch_model, found: dict) -> dict:
    """{torch key: mapping.loose.Loose} of each tensor a module holds itself that is the very tensor one of its
    children holds where the child's is paired to a bare parameter of the Paddle parent (found: loose.find's {torch
    key: Loose}): the same Paddle tensor, in the child's layout, said so."""
    modules, out = dict(torch_model.named_modules()), {}
    for key, how in found.items():
        child, _, tname = key.rpartition(".")
        parent = child.rpartition(".")[0]
        tensor = getattr(modules.get(child), tname, None)
        for name, own in modules[parent].named_parameters(recurse=False) if child in modules else ():
            whole = f"{parent}.{name}" if parent else name
            if own is tensor and whole not in found:
                out[whole] = replace(how, rule=lambda _, array, rule=how.rule, t=tname: rule(t, array),
                                     why=f"torch {whole}, the very tensor {key} is: {how.why}")
    return out
