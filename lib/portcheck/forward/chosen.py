"""outputs=, the outputs a report judges: checked (checked_outputs, a Chosen; checked_outputs_of), the model's own
outputs it names kept (selected), a module's outputs paired as it names them (as_named, named_line), and the outputs=
printed back to paste: mended where it names what a module does not return (mended), the one the run's values pair
where one output was paired with one of several by a guess (suggested), the one comparing what both sides return
(shared). May import core, mapping and forward's leaves."""
import re
from typing import NamedTuple

from portcheck.core.errors import PipelineError
from portcheck.core.keys import ROOT, module_of, split_key
from portcheck.forward.leaves import pair_leaves
from portcheck.mapping.ties import distance, nearest_of


def output_name(rest: str) -> str:
    """The model output a leaf belongs to, as its user names it: a ModelOutput's or a dict's field (logits,
    past_key_values), a tuple's position ([1]), or "the output" for a lone one."""
    top = re.match(r"^(:[^:\[]*|\[\d+\])", rest)
    return "the output" if not rest else top.group(1).lstrip(":") if top else rest


def selected(leaves: dict, names, side: str) -> tuple:
    """(the leaves outputs= names, [left out]): names are a field's name (str) or a position (int); a lone output is
    the one output. A name the side's output lacks is one line; a run that stopped returned nothing: the stop is said
    (report.stopped), not the names."""
    if names is None or not leaves or list(leaves) == [""]:
        return leaves, []
    tops = {output_name(rest) for rest in leaves}
    wanted = {n if isinstance(n, str) else f"[{n}]" for n in names}
    lacking = sorted(wanted - tops)
    if lacking:
        raise PipelineError(f"outputs={list(names)!r}: the {side} model's output has no {lacking[0]} (its outputs: "
                            f"{', '.join(sorted(tops))}); name its outputs by field or position [PC404]")
    keep = {rest: key for rest, key in leaves.items() if output_name(rest) in wanted}
    return keep, sorted({f"{side} {output_name(rest)}" for rest in leaves if rest not in keep})


class Chosen(NamedTuple):
    """outputs= as checked: the names of the model's own outputs compared on each side (None: every one), each
    module's {torch module: (torch names, Paddle names)}, and the argument as given (printed back with a module's
    entry added, to be pasted)."""
    torch: list = None
    paddle: list = None
    modules: dict = {}
    given: object = None


def _names_of(outputs):
    """(torch names, Paddle names) of one output form: a list of names or positions for both sides, or a dict
    {torch name or position: Paddle name or position}; None when it is not one."""
    ok = lambda n: (isinstance(n, str) and n) or (isinstance(n, int) and not isinstance(n, bool) and n >= 0)
    pairs = list(outputs.items()) if isinstance(outputs, dict) else \
        [(n, n) for n in outputs] if isinstance(outputs, (list, tuple)) else None
    if not pairs or not all(ok(a) and ok(b) for a, b in pairs):
        return None
    return [a for a, _ in pairs], [b for _, b in pairs]


def checked_outputs(outputs) -> Chosen:
    """outputs= as a Chosen: None (every output), the model's own outputs' form (_names_of), or a dict of such
    forms by torch module name, the model's own under ROOT ({"encoder": [1], "(model)": ["logits"]}); else one
    line."""
    if outputs is None or isinstance(outputs, Chosen):
        return outputs or Chosen()
    root = _names_of(outputs)
    if root:
        return Chosen(*root, {}, outputs)
    modules = {m: _names_of(v) for m, v in outputs.items() if isinstance(m, str) and m
               and isinstance(v, (list, tuple, dict))} if isinstance(outputs, dict) else {}
    if not modules or len(modules) != len(outputs) or not all(modules.values()):
        raise PipelineError(f"outputs={outputs!r}: name the model outputs to compare, a list of fields or positions "
                            "(['logits'], [0]) or a dict {torch's: Paddle's}; a module's, those by its torch name "
                            "({'encoder': [1]}) [PC405]")
    return Chosen(*modules.pop(ROOT, (None, None)), modules, outputs)


def with_module(given, module: str, names) -> dict:
    """outputs= as given, with a module's entry added: what a line prints to be pasted."""
    by_module = isinstance(given, dict) and given and all(isinstance(v, (list, tuple, dict)) for v in given.values())
    return {**(given if by_module else {} if given is None else {ROOT: given}), module: names}


def _top(name) -> str:
    """An outputs= name as output_name says it: a field as it is, a position as "[i]"."""
    return name if isinstance(name, str) else f"[{name}]"


def _returns(leaves: dict, name) -> bool:
    """Whether a call's outputs hold the one outputs= names (a lone output stands for any name)."""
    return list(leaves) == [""] or _top(name) in {output_name(rest) for rest in leaves}


def as_named(t_call: str, t: dict, p: dict, names: tuple, mended) -> dict:
    """{torch leaf: Paddle leaf} of a module's outputs as outputs= names them ((torch names, Paddle names), a lone
    output standing for any name); a name neither a lone output nor one of the call's outputs is one line, ending
    with the outputs= mended() gives to paste."""
    out = {}
    for side, leaves, wanted in (("torch", t, names[0]), ("Paddle", p, names[1])):
        tops = {output_name(rest) for rest in leaves}
        lacking = [_top(n) for n in wanted if not _returns(leaves, n)]
        if lacking:
            raise PipelineError(f"outputs=: {side}'s {t_call} returns no {lacking[0]} (its outputs: "
                                f"{', '.join(sorted(tops))}); name a module's outputs by field or position, as "
                                f"outputs={mended()!r} does [PC461]")
    for a, b in zip(*names):
        mine = [k for k in t if k == "" or output_name(k) == _top(a)]
        theirs = [k for k in p if k == "" or output_name(k) == _top(b)]
        out.update((x, y) for x, y in pair_leaves(mine, theirs).items() if x not in out and y not in out.values())
    return out


def named_line(t_call: str, t_out: str, p_out: str, t: dict, p: dict, pairs: dict) -> str:
    """A module's outputs as outputs= paired them, and those it left out, in one line."""
    said = lambda call, keys: ", ".join(f"{call}{k}" for k in keys)
    rest = [said(f"torch's {t_out}" if i == 0 else f"Paddle's {p_out}", keys) for i, keys in
            enumerate(([a for a in t if a not in pairs], [b for b in p if b not in pairs.values()])) if keys]
    return (f"{t_call}: outputs= pairs " + "; ".join(f"torch's {t_out}{a} with Paddle's {p_out}{b}"
                                                     for a, b in pairs.items())
            + (f"; left out, not judged: {'; '.join(rest)}" if rest else ""))


def _argument(rest: str):
    """An output's leaf key as outputs= names it: a position's number, else its field ("" for a lone output)."""
    return int(rest[1:-1]) if re.fullmatch(r"\[\d+\]", rest) else output_name(rest)


def _form(pairs: list):
    """[(torch name, Paddle name)] as outputs= takes them: a list where each pair has one name, else a dict."""
    return [a for a, _ in pairs] if all(a == b for a, b in pairs) else dict(pairs)


def mended(torch_record: dict, paddle_record: dict, call: tuple, names: tuple, given):
    """outputs= as given with its entry for one module mended to name what both sides' call returns: the pairs of
    names both return, kept; else the pairing with no entry (pair_leaves'), one output against several by the run's
    values (suggested); else the module's entry left out (None where nothing is left). call: (torch call, torch
    output call, Paddle output call, torch leaves, Paddle leaves)."""
    t_call, t_out, p_out, t, p = call
    module = module_of(t_call)
    kept = [(a, b) for a, b in zip(*names) if _returns(t, a) and _returns(p, b)]
    if kept:
        return with_module(given, module, _form(list(dict.fromkeys(kept))))
    pairs = pair_leaves(list(t), list(p), (t, p))
    if len(pairs) == 1 and len(t) != len(p) and 1 in (len(t), len(p)):
        nearer = suggested(torch_record, paddle_record, (t_out, p_out, t, p, pairs), module, given)
        if nearer:
            return nearer[0]
    named = list(dict.fromkeys((_argument(a or b), _argument(b or a)) for a, b in pairs.items()))
    if named:
        return with_module(given, module, _form(named))
    return {m: v for m, v in with_module(given, module, []).items() if m != module} or None


def suggested(torch_record: dict, paddle_record: dict, guess: tuple, module: str, given):
    """(the outputs= pairing a module's one output with the other side's output its values are nearest (ties.
    nearest_of), that pair said) where that is not the pair pair_leaves guessed (outputs.counterparts' kept["guessed"]);
    else None."""
    t_out, p_out, t, p, pairs = guess
    (a, b), = pairs.items()
    one, many = (("torch", a), p) if len(t) == 1 else (("Paddle", b), t)
    value = lambda record, key: [record[key]] if key in record else []
    d = {k: distance(value(torch_record, f"out/{t_out}{a if len(t) == 1 else k}"),
                     value(paddle_record, f"out/{p_out}{k if len(t) == 1 else b}")) for k in many}
    best = nearest_of(d) if len(d) > 1 else None
    if best is None or best == (b if len(t) == 1 else a):
        return None
    x, y = (a, best) if len(t) == 1 else (best, b)
    pair = f"torch's {t_out}{x} with Paddle's {p_out}{y}"
    x, y = _argument(x or y), _argument(y or x)  # a lone output takes the other side's name
    return with_module(given, module, [x] if x == y else {x: y}), pair


def checked_outputs_of(chosen: Chosen, torch_record: dict):
    """A module outputs= names that did not run in the torch model is one line."""
    ran = {module_of(split_key(k)[1]) for k in torch_record if k.startswith("out/")}
    missing = sorted(set(chosen.modules) - ran)
    if missing:
        raise PipelineError(f"outputs={chosen.given!r}: the torch model has no module {missing[0]} that ran; name "
                            "a module by its torch name (report.pairing.modules()), the model's own outputs by "
                            f"{ROOT!r} [PC460]")


def shared(t_all: dict, p_all: dict, root: dict):
    """outputs= naming the model outputs both sides return (root's pairs), as it takes them, to be pasted: a list
    where each pair has one name (a position as its number; a lone output takes the other side's), else a dict
    {torch's: Paddle's}."""
    name = lambda leaves, key: next(output_name(rest) for rest, k in leaves.items() if k == key)
    arg = lambda n: int(n[1:-1]) if re.fullmatch(r"\[\d+\]", n) else n
    pairs = []
    for t, p in root.items():
        a, b = name(t_all, t), name(p_all, p)
        a, b = arg(b if a == "the output" else a), arg(a if b == "the output" else b)
        pairs += [(a, b)] if (a, b) not in pairs else []
    return [a for a, _ in pairs] if all(a == b for a, b in pairs) else dict(pairs)


def output_names(leaves: dict) -> str:
    return sorted({output_name(rest) for rest in leaves})
