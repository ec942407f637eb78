"""Which Paddle module is which torch module, with no name map, or beyond the entries of the one given.

Each side is a sequence of module calls: in run order when the models ran on a batch (a record's out/ keys),
then the modules holding tensors that did not run, in definition order; with no run, the modules holding
tensors in definition order. A call carries what identifies a module across frameworks: the shapes of the
tensors its module holds itself (each shape's sizes sorted, so torch's Linear [out, in] and Paddle's [in, out]
agree), whether it has children, its class and name, and the shapes of its outputs.

The two sequences are aligned as edit distance aligns two strings (Needleman-Wunsch): the order-keeping
pairing of highest total similarity, where leaving a call unpaired costs nothing. A wrapper one side adds, an
activation the other folds into a block, a module called twice or extra containers shift no other pair, as
they would in a positional zip. Calls left over are aligned again among themselves (a shortcut defined before
its block on one side and after it on the other).

Two modules holding different tensor shapes never pair (but for the same values with axes merged, regroup's: such a
pair waits for the calls left over where either side holds the other's very shapes); a module holding tensors never
pairs with one holding none; a leaf holding none pairs only with a leaf of its family (an activation with an
activation). Where two candidates fit equally well and the order cannot separate them, the run's values do: the
candidate whose output is torch's (transformers' MobileNetV2InvertedResidual is Paddle's InvertedResidual, not its
inner Sequential, because the block adds its input); a tie resting on a pair of containers whose insides do not
correspond is none, that pair forbidden first (_unfit). What values cannot settle either is refused, naming the
modules and the name_map that settles it, written as the API takes it. A name_map's entries (names.entries: the
modules it names) are kept as given; the rest is automatic. The root modules are each other's. Outputs of the same
values in another shape ([batch * seq, hidden] against [batch, seq, hidden]) pair. Lists of like modules that
correspond (lists.matched: an MoE's experts) pair child by child, by their index, never by the routing.

The calls, their similarity, the alignment pass and the pairs the structure forbids are portcheck.mapping.alignment's;
what the pairing chose, as data, portcheck.mapping.paired's (Pairing).
"""
from dataclasses import replace

import numpy as np

from portcheck.core import spill
from portcheck.core.errors import PipelineError
from portcheck.core.keys import ROOT, input_after, module_of, positions, split_key
from portcheck.mapping.alignment import FIXED, _align, _blocked, _fits, _inconsistent, _unfit, sequence, similarity
from portcheck.mapping.modules import ACT, family, held, text
from portcheck.mapping.paired import Pairing
from portcheck.mapping.taken import taken_rules
from portcheck.mapping.trace import applied_rules, scale_rules
from portcheck.mapping.names import entries
from portcheck.mapping.lists import BY_INDEX, indexed, inside, keys as list_keys, matched, normal as _normal
from portcheck.mapping.ties import (ambiguity, containers, distance, fusions_of, nearest_of, one_module_each,
                                    outputs_of, same_values, settled_by_name, settled_by_parent, settled_by_value,
                                    tied_calls, ties_said)


def pair(torch_record: dict, paddle_record: dict, name_map=None, weights_only=False, calls=None) -> Pairing:
    """Pair the module calls of a torch record with a Paddle one (record_forward's, describe's, or a training
    record's first forward). name_map's entries are kept; the rest is aligned (module docstring). Where two
    candidates fit equally well, the run's values settle it (settled_by_value: the one whose output is torch's);
    raises a PipelineError naming the modules and the entry that settles it when they cannot. weights_only:
    ties between calls holding no tensors are left to the alignment (a conversion's weights do not depend on
    them, and its models do not hold the same weights yet: values cannot settle them)."""
    ts, ps = sequence(torch_record), sequence(paddle_record)
    result = Pairing(torch_calls=ts, paddle_calls=ps)
    by_name = {c.name: c for c in ps}
    named, fixed, sent = entries(name_map), {}, {}
    ran = any(k.startswith("out/") for k in torch_record) and any(k.startswith("out/") for k in paddle_record)
    for t in ts:
        target = ROOT if t.module == ROOT else named(t.module)
        if target in (None, ROOT, "") and t.module != ROOT and (target is None or not t.tensors):
            # a prefix sent to the model itself ({"model": "(model)"}): its modules are the Paddle model's; the
            # module itself is left to the alignment, the models' own outputs being judged against each other. One
            # holding tensors of its own is the model's counterpart beside torch's model ([("^embeddings$",
            # "(model)")]: a ViT's embeddings holding the tables the port's model holds)
            continue
        target = target or ROOT
        call = target + t.name[len(t.module):]
        if call in by_name:
            fixed[t.name] = call
            sent.setdefault(target, []).append(t.name)
        elif target not in {c.module for c in ps}:
            result.missing[t.module] = target
    for target, names in sent.items():
        if len({module_of(t) for t in names}) > 1:
            # several torch modules sent to one Paddle module (each half's own embedding on one side, tied, and
            # one `shared` both halves call on the other): each torch call takes the Paddle call whose output is
            # its own, else the next in run order
            free = [c.name for c in ps if c.module == target]
            for t in names:
                d = {p: distance(outputs_of(torch_record, t), outputs_of(paddle_record, p))
                     for p in free} if ran else {}
                fixed[t] = min(free, key=lambda p: (d.get(p, 0), free.index(p))) if free else fixed[t]
                free.remove(fixed[t]) if fixed[t] in free else None
    result.named = {t for t in fixed if module_of(t) != ROOT}
    # calls the run paired (portcheck.forward.alike: like calls their readers tell apart), kept as the map's are
    fixed.update({t: p for t, p in (calls or {}).items() if any(c.name == t for c in ts) and p in by_name})

    def harmless(side, candidates):
        """Candidates holding no tensors whose outputs are the same values (nested containers returning one
        tensor): either pairing compares the same thing."""
        if any(c.tensors for c in candidates):
            return False
        record = torch_record if side == "torch" else paddle_record
        first = outputs_of(record, candidates[0].name)
        return bool(first) and all(same_values(first, outputs_of(record, c.name)) for c in candidates[1:])

    forbidden, calls, unsettled, refused, fusions, tied = set(), {c.name: c for c in ts}, set(), [], {}, []
    picked = set()  # torch calls a conversion's tie took in a first order: the run settles them, as the order's pairs
    from portcheck.mapping.fused import packed_parts  # fused reads pairing's records: imported here, where it is needed
    packed = packed_parts(torch_record)
    fixed_p = set(fixed.values())
    # what can score: a pair the map gives, else two calls holding the same shapes (similarity)
    lists = matched(torch_record, paddle_record)  # child i of a list pairs with child i alone, its rows any count
    at_t = list_keys({c.module for c in ts}, {t: t for t in lists})
    at_p = list_keys({c.module for c in ps}, {p: t for t, p in lists.items()})
    # rows any count only in a list of like children (experts, whose rows the routing sets); the children of a list
    # paired index by index for being unlike (a stage whose first block widens, a dense layer before MoE layers) each
    # run on every row, and a call there fits by its outputs as anywhere
    kinds = indexed(torch_record)
    routed = lambda key: any(kinds[at][1][:1] != (BY_INDEX,) for at, _ in key)  # noqa: E731
    sizes = lambda c: tuple(sorted(int(np.prod(s)) for s in held(c.tensors)))  # the same under merged axes (regroup)
    groups = (lambda t: ("map", fixed[t.name]) if t.name in fixed else (at_t[t.module], sizes(t)),
              lambda p: ("map", p.name) if p.name in fixed_p else (at_p[p.module], sizes(p)))
    grown = None
    # the shapes each side's modules hold: a pair whose tensors fit only with axes merged (a (1, 3) conv [2, 2, 1, 3]
    # against a 1x1 conv [2, 6, 1, 1], as many values) waits for the calls left over where either side holds the
    # other's very shapes, so that the run's order never takes it over the pair holding them
    very = ({held(c.tensors) for c in ts if c.tensors}, {held(c.tensors) for c in ps if c.tensors})
    while True:
        def score(t, p):
            if t.name in fixed or p.name in fixed_p:
                return FIXED if fixed.get(t.name) == p.name else None
            if (t.name, p.name) in forbidden:
                return None
            if first and t.tensors and held(t.tensors) != held(p.tensors) and \
                    (held(t.tensors) in very[1] or held(p.tensors) in very[0]):
                return None
            return similarity(replace(t, outputs=()), replace(p, outputs=())) if routed(at_t[t.module]) else \
                similarity(t, p)
        pairs, first = {}, True
        while True:  # the first pass aligns every call that ran; each next one the modules holding tensors left over
            taken = set(pairs.values())
            # a module that did not run (torch's MultiheadAttention reads out_proj's weight without calling it) has
            # no place in the run's order: in the first pass, a map's or a tie's pair of it would cross every other
            kept = lambda c: (c.tensors or first) and (c.outputs or not (first and ran))
            left_t = [c for c in ts if c.name not in pairs and c.module not in result.missing and kept(c)]
            left_p = [c for c in ps if c.name not in taken and kept(c)]
            if packed:
                # a packed module's parts never run (torch's MultiheadAttention reads q, k and v from in_proj_weight):
                # no order places them, their names do, where the other side holds a module of that very name that
                # fits (Fused(("q_proj", "k_proj", "v_proj"), output=False) against Paddle's q_proj, k_proj, v_proj)
                same = {p.name: p for p in left_p}
                named_here = {t.name: t.name for t in left_t if t.name in packed and t.name in same
                              and t.name not in fixed and score(t, same[t.name]) is not None}
                pairs.update(named_here)
                left_t = [c for c in left_t if c.name not in named_here]
                left_p = [c for c in left_p if c.name not in named_here.values()]
            found, ties, others = _align(left_t, left_p, score, harmless, groups)
            if first and lists and ran and grown is None:  # children one side did not run (lists.inside)
                grown = inside(found, ties, (left_t, left_p), (ts, ps), lists, kinds, fixed)
                if grown:
                    fixed.update(grown)
                    fixed_p.update(grown.values())
                    pairs, first = {}, True
                    continue
            # torch calls the map sends to one Paddle call (a head tied to the embedding, each named): nothing to settle
            ties = [(i, j) for i, j in ties if not isinstance(i, list) or
                    any(fixed.get(left_t[k].name) != left_p[j].name for k in i)]
            if weights_only:  # a tie among calls of one module on each side sends the same weights either way
                ties = [tie for tie in ties if any(c.tensors for c in tied_calls(tie, left_t, left_p))
                        and not one_module_each(tie, left_t, left_p)]
            if ties:
                # a tie may rest on a pair joining containers whose insides do not correspond, which _inconsistent
                # forbids after the alignment: torchvision's features.11 (a residual block, its only child the
                # layers) against Paddle's whole `blocks` makes features.11.block -> blocks.10 as good as
                # features.11 -> blocks.10. Forbidden first, the structure decides, not values a bug upstream moves.
                bad = _unfit(pairs, found, others, left_t, left_p, calls) - set(fixed.items()) - forbidden
                if bad:
                    forbidden |= bad
                    pairs, first = {}, True
                    continue
                # a conversion's models do not hold the same weights yet: their values settle nothing
                chosen = (settled_by_value(ties, left_t, left_p, torch_record, paddle_record)
                          if ran and not weights_only else {}) or settled_by_name(ties, left_t, left_p)
                by_parent = {}
                if not chosen and ran and not weights_only:  # values cannot say: the structure around them may
                    held_now = {**pairs, **fixed, **{left_t[i].name: left_p[j].name for i, j in found}}
                    chosen = by_parent = settled_by_parent(ties, left_t, left_p, {module_of(t): module_of(p)
                                                                                  for t, p in held_now.items()})
                # a conversion's run: modules of one shape tied (RepVGG's branches' norms, each fitting both) are
                # taken in a first order and settled by convert on the converted run, as an order's pairs are
                said = ties_said(ties, left_t, left_p)
                if not chosen and weights_only and ran and all(_swappable(one, others) for one, others, _ in said) \
                        and not fusions_of(ties, left_t, left_p, ts, ps):  # parts of a fused module: its layout said
                    tied += [{c.name for c in others} if torch_one else {one.name} for one, others, torch_one in said]
                    for one, others, torch_one in said:
                        t, p = (one.name, others[0].name) if torch_one else (others[0].name, one.name)
                        if t not in chosen and p not in chosen.values():
                            chosen[t] = p
                    picked.update(chosen)
                elif not chosen:
                    # refused once every tie is found: each one's first candidate taken, as the map the refusal
                    # prints does, so that the ties it would leave are said with it (pasted, it pairs them all)
                    refused += said
                    fusions.update(fusions_of(ties, left_t, left_p, ts, ps))
                    for one, others, torch_one in ties_said(ties, left_t, left_p):  # the first tie's at least
                        t, p = (one.name, others[0].name) if torch_one else (others[0].name, one.name)
                        if t not in chosen and p not in chosen.values():
                            chosen[t] = p
                else:
                    result.settled.update((t, p) for t, p in chosen.items() if t not in by_parent)  # "(by value)"
                    result.fusions.update(fusions_of(ties, left_t, left_p, ts, ps, ran=True))
                fixed.update(chosen)  # kept as a map's entries are, and the whole alignment made again
                fixed_p.update(chosen.values())
                pairs, first = {}, True
                continue
            if not found and not first:
                break
            pairs.update((left_t[i].name, left_p[j].name) for i, j in found)
            first = False
        if refused:
            error = PipelineError(ambiguity(refused, ran, fusions, (ts, ps), guessed=weights_only))
            error.fusions = fusions  # {module's last name: its parts}, as data: fused.taken declares them
            raise error
        pairs.update(fixed)  # a map's entries that cross each other are kept too
        bad = (_inconsistent(pairs, calls) | _blocked(pairs, calls, by_name)) - set(fixed.items()) - forbidden
        if bad:
            forbidden |= bad
            continue
        doubt = [g for g in _doubtful(pairs, calls, by_name, {t: p for t, p in fixed.items() if t not in picked})
                 if not {t for t, _ in g} & unsettled]
        if not doubt or weights_only or not ran:
            # a conversion's models do not hold the same weights yet: convert settles them, the ties' groups too, one
            # group where they share a module (three 1x1 convs, two of them tied, the third in another branch)
            result.doubtful = _joined(doubt + _tied_groups(tied, pairs, fixed))
            break
        # the order alone chose them: each call takes the candidate whose output is its own, as a tie does
        index_t, index_p = {c.name: i for i, c in enumerate(ts)}, {c.name: j for j, c in enumerate(ps)}
        ties = [(index_t[t], [index_p[q] for _, q in g]) for g in doubt for t, _ in g]
        chosen = settled_by_value(ties, ts, ps, torch_record, paddle_record)
        unsettled |= {t for g in doubt for t, _ in g if t not in chosen}  # values cannot say: the order stands
        fixed.update(chosen)
        fixed_p.update(chosen.values())
        result.settled.update((t, p) for t, p in chosen.items() if pairs.get(t) != p)
    pairs.update(containers(pairs, ts, ps, _fits) if ran and not weights_only else {})  # the order could not pair
    # a module holding tensors no output pairs (a router returning its top k where torch's returns a value per
    # expert) and the unpaired Paddle module of its very name holding tensors of the same sizes: the same place
    taken = set(pairs.values())
    same = {p.name: p for p in ps if p.name not in taken and p.tensors}
    # (a conv padded in another place, its output another size along its spatial axes, is not: the two outputs meet
    # further on, where compare_forward judges it)
    pairs.update({t.name: t.name for t in ts if t.name not in pairs and t.tensors and t.name in same
                  and t.module not in result.missing and sizes(t) == sizes(same[t.name])
                  and not _spatially_apart(t.outputs, same[t.name].outputs)})
    order = {c.name: k for k, c in enumerate(ts)}
    result.pairs = dict(sorted(pairs.items(), key=lambda kv: order[kv[0]]))
    if ran and not weights_only:
        result.composed = _composed(result, torch_record, paddle_record)
        result.paddle_composed = _composed(result, torch_record, paddle_record, "paddle")
        result.acts = {c.name: text(paddle_record, ACT + c.module) for c in ps if ACT + c.module in paddle_record}
        result.met = _met(result, torch_record, paddle_record)
        result.applied = {**{t: rule for t, rule in scale_rules(result.pairs, torch_record, paddle_record).items()
                             if t not in result.composed and t not in result.paddle_composed},
                          **applied_rules(result, torch_record, paddle_record)}
        result.applied.update(taken_rules(result, torch_record, paddle_record,
                                          {*result.composed, *result.paddle_composed, *result.applied, *result.met}))
    return result


def _composed(result: Pairing, torch_record: dict, paddle_record: dict, side: str = "torch") -> dict:
    """{torch call: [the calls of `side` after its pair's call of that side]} where the other side's call outputs
    what that one computes and then those: leaves holding no tensors and paired with nothing, each fed the output of
    the one before (Paddle's legacy BatchNorm(act='relu') against torch's BatchNorm2d and the ReLU it runs next;
    side="paddle": timm's BatchNormAct2d against Paddle's BatchNorm2D and ReLU). Taken when the last one's output is
    nearer the other's by APART than any shorter chain's (nearest_of): the run's values say it."""
    mine, record, other = (result.torch_calls, torch_record, paddle_record) if side == "torch" else \
        (result.paddle_calls, paddle_record, torch_record)
    pairs = result.pairs if side == "torch" else {p: t for t, p in result.pairs.items()}
    ran = [c for c in mine if c.outputs]
    free = set(result.torch_unpaired if side == "torch" else result.paddle_unpaired)
    outs = {}
    for key in record:
        if key.startswith("out/"):
            outs.setdefault(split_key(key)[1], []).append(key)
    out = {}
    for i, c in enumerate(ran):
        theirs = pairs.get(c.name)
        if theirs is None or c.module == ROOT:
            continue
        chain, last = [], outs.get(c.name, [None])[0]
        for n in ran[i + 1:]:
            fed = f"in/{n.name}"
            if n.name not in free or n.tensors or n.children != 0 or fed not in record or last is None or \
                    spill.identity(record, fed) != spill.identity(record, last):
                break
            chain.append(n.name)
            last = outs[n.name][0]
        if not chain:
            continue
        # a pass-through (timm's Identity drop_block and aa around its act2) hands on the one output it was given:
        # it is no candidate of its own, or the chain through it ties with the chain before it
        moved = [n for k, n in enumerate(chain) if spill.identity(record, outs[n][0]) !=
                 spill.identity(record, outs[([c.name, *chain])[k]][0])]
        if side == "torch" and ACT + module_of(theirs) in other and moved and \
                family(next(r.kind for r in ran[i + 1:] if r.name == moved[0])) == "activation":
            out[c.name] = chain[:chain.index(moved[0]) + 1]  # Paddle's module says it holds an activation
            continue
        there = outputs_of(other, theirs)
        best = nearest_of({n: distance([record[outs[n][0]]], there) for n in [c.name, *moved]})
        if best is not None and best != c.name:
            out[c.name if side == "torch" else theirs] = chain[:chain.index(best) + 1]
    return out


def _met(result: Pairing, torch_record: dict, paddle_record: dict) -> dict:
    """{torch call: the Paddle call whose input its output is judged against}: where torch's module hands its
    output unchanged to the next module it pairs, and Paddle's forward computes something between its module and
    that module's counterpart (timm's BatchNormAct2d holding its SiLU, PaddleClas's BatchNorm whose parent applies
    F.swish): the two outputs meet at that input. Taken when torch's output is nearer that input than Paddle's
    module's output by APART (nearest_of): the run's values say it."""
    done = {*result.composed, *result.paddle_composed, *result.applied}
    keys, at = positions(torch_record)
    p_walk = None  # the Paddle record's, walked only where a module paired with none reads torch's output
    out = {}
    for t, p in result.pairs.items():
        key = f"out/{t}"
        if t == ROOT or t in done or key not in at or f"out/{p}" not in paddle_record:
            continue
        mine = spill.identity(torch_record, key)
        fed = [split_key(k)[1] for k in keys[at[key] + 1:] if k.startswith("in/")]
        read = [n for n in fed[:next((i for i, n in enumerate(fed)
                                      if spill.identity(torch_record, f"in/{n}") != mine), len(fed))]]
        if not read:  # torch computes something between too: not a module's output handed on as it is
            continue
        # the modules reading it as it is, outermost first: the first one paired, else (a module paired with none,
        # timm's Conv2dSame against a conv and a crop) the first module Paddle runs after its own
        theirs = next((result.pairs[n] for n in read if n in result.pairs), None)
        if theirs is None:
            p_walk = p_walk or positions(paddle_record)
            fed = input_after(p_walk[0], p_walk[1][f"out/{p}"])
            theirs = split_key(fed)[1] if fed else None
        if theirs is None or f"in/{theirs}" not in paddle_record or \
                spill.identity(paddle_record, f"in/{theirs}") == spill.identity(paddle_record, f"out/{p}"):
            continue
        mine = [torch_record[key]]
        if nearest_of({p: distance(mine, outputs_of(paddle_record, p)),
                       theirs: distance(mine, [paddle_record[f"in/{theirs}"]])}) == theirs:
            out[t] = theirs
    return out


def _doubtful(pairs: dict, t_calls: dict, p_calls: dict, fixed: dict) -> list:
    """[[(torch call, Paddle call), ...]]: pairs the alignment chose by their order alone. Modules holding the same
    shapes (_swaps), siblings on each side, each fitting every other's counterpart, whose names do not say which is
    which (transformers' query and key against k_proj and q_proj, run in the other order: the order pairs query with
    k_proj). Their own outputs cannot tell them apart before the weights are the same; after, each is its own."""
    groups = {}
    for t, p in pairs.items():
        a, b = t_calls.get(t), p_calls.get(p)
        if t in fixed or a is None or b is None or not _swaps(a) or not _swaps(b) or "#" in t or "#" in p:
            continue
        where = (a.module.rpartition(".")[0], b.module.rpartition(".")[0], a.tensors, a.outputs, b.outputs)
        groups.setdefault(where, []).append((t, p))
    found = [g for g in groups.values() if len(g) > 1 and not all(_normal(t)[-1] == _normal(p)[-1] for t, p in g)
             and all(similarity(t_calls[t], p_calls[q]) is not None for t, _ in g for _, q in g)]
    return found + _branches(pairs, t_calls, p_calls, fixed, {t for g in found for t, _ in g})


BRANCHES = 4  # the most leaves of one shape in one block convert settles across branches (24 orders)


def _branches(pairs: dict, t_calls: dict, p_calls: dict, fixed: dict, grouped: set) -> list:
    """[[(torch call, Paddle call), ...]]: modules of one shape (_swaps) the order paired across branches of one block
    (RepVGG's identity BatchNorm and its 3x3 branch's, each side running its branches in its own order): grouped by
    the nearest paired ancestor of both, where the direct parents are not a pair. At most BRANCHES in a group; the run's
    values settle them as _doubtful's."""
    modules = {module_of(t): module_of(p) for t, p in pairs.items()}

    def anchor(t: str, p: str):
        while t:
            t = t.rpartition(".")[0]
            q = modules.get(t or ROOT)
            if q is not None and (q in ("", ROOT) or p.startswith(q + ".")):
                return t
        return None
    groups = {}
    for t, p in pairs.items():
        a, b = t_calls.get(t), p_calls.get(p)
        if t in grouped or t in fixed or a is None or b is None or not _swaps(a) or not _swaps(b) \
                or "#" in t or "#" in p:
            continue
        t_parent, p_parent = a.module.rpartition(".")[0] or ROOT, b.module.rpartition(".")[0] or ROOT
        if modules.get(t_parent) == p_parent:
            continue  # siblings of a pair: _doubtful's
        where = anchor(a.module, b.module)
        if where is not None and _normal(t)[-1] != _normal(p)[-1]:  # a pair its names say stands
            groups.setdefault((where, a.tensors, a.outputs, b.outputs), []).append((t, p))
    return [g for g in groups.values() if 1 < len(g) <= BRANCHES
            and all(similarity(t_calls[t], p_calls[q]) is not None for t, _ in g for _, q in g)]


def _swaps(call) -> bool:
    """A module convert may settle by its run among others of its shapes: one holding tensors of its own, a leaf or
    not (timm's BatchNormAct2d holds its activation as a child): its own tensors move whole to the module tried, as
    each of its children holding tensors is paired, and settled, on its own."""
    return bool(call.tensors)


def _swappable(one, others) -> bool:
    """A tie convert may settle by its run: modules _swaps takes, each candidate holding the one's shapes."""
    return all(_swaps(c) and c.tensors == one.tensors for c in [one, *others])


def _tied_groups(tied: list, pairs: dict, fixed: dict) -> list:
    """[[(torch call, Paddle call), ...]] of the ties a conversion took in a first order: per tie's Paddle candidates,
    the torch calls paired with them, for convert to settle by its run (mapping.settle.settle_by_run)."""
    pairs = {**pairs, **fixed}
    groups = [[(t, p) for t, p in pairs.items() if p in candidates] for candidates in tied]
    return [g for g in groups if len(g) > 1]


def _joined(groups: list) -> list:
    """The groups convert settles, those sharing a module made one (the order's pairs of one block's branches and a
    tie among them: every order of them all is tried together) where it stays within BRANCHES; else a module stays in
    the first group holding it, as each is settled once."""
    out = []
    for group in groups:
        group = list(dict.fromkeys(group))
        meets = [g for g in out if {x for pair in g for x in pair} & {x for pair in group for x in pair}]
        union = list(dict.fromkeys([pair for g in meets for pair in g] + group))
        if meets and len(union) <= BRANCHES and len({t for t, _ in union}) == len({p for _, p in union}) == len(union):
            out = [g for g in out if g not in meets] + [union]
            continue
        seen = {x for g in out for pair in g for x in pair}
        group = [(t, p) for t, p in group if t not in seen and p not in seen]
        if len(group) > 1:
            out.append(group)
    return out




def _spatially_apart(a: tuple, b: tuple) -> bool:
    """Two calls' outputs of one count and rank whose shapes part along two axes or more (a conv padded otherwise:
    height and width), where a router's top k against its logits parts along the last axis alone."""
    return bool(a) and len(a) == len(b) and any(
        len(x) == len(y) and sum(i != j for i, j in zip(x, y)) >= 2 for x, y in zip(a, b))
