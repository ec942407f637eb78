"""Lists of like modules paired by their index: a ModuleList's or LayerList's children (named 0, 1, ...), such as a
mixture of experts' experts or a stack's layers.

Two lists correspond when each holds as many children, every child of one structure (the same layout-free tensor
shapes, modules.decode's) on both sides, or each child of the structure of the child of its index on the other side
(a stage whose first block widens: without the index, sibling branches run in another order would pair across the
blocks), and the two are the only lists of that structure on their sides or bear the same name. Then whatever runs inside child i of one pairs only with what runs inside child i of the other: the
index says which expert is which, never the run's order or an expert's output rows, which the routing of tokens
sets (before the weights are the same, each side routes tokens to other experts, and an expert no token reaches
may not run at all). Imports portcheck.core and mapping.modules."""
import functools

from portcheck.core.keys import ROOT
from portcheck.mapping.modules import META, decode


@functools.lru_cache(maxsize=4096)
def normal(name: str) -> tuple:
    """A module name's parts, lowercase, without underscores, a plural's s dropped (layer and layers)."""
    parts = [p.replace("_", "") for p in name.lower().split(".")]
    return tuple(p[:-1] if len(p) > 3 and p.endswith("s") else p for p in parts)


def indexed(record: dict) -> dict:
    """{list module: (its children's count, their one structure)} of one side's record: every module whose children
    are all named by their index 0 .. n-1 (n >= 2), each child's subtree holding the same tensor shapes (sorted),
    some; where the children hold unlike shapes, some, their structure is (BY_INDEX, each child's shapes)."""
    held, children = {}, {}
    for key in record:
        if key.startswith(META):
            name = key[len(META):].rpartition("/")[0]
            count, tensors = decode(record[key])
            held[name] = tensors
            children[name] = count
    below = {}
    for name in held:
        parent, _, last = name.rpartition(".")
        if name != ROOT and last.isdigit():
            below.setdefault(parent or ROOT, set()).add(int(last))
    lists = {parent for parent, indices in below.items()
             if len(indices) >= 2 and indices == set(range(len(indices))) and children.get(parent) == len(indices)}
    shapes = {}  # {(list, index): the tensor shapes its child's subtree holds}: each module counted once per ancestor
    for name, tensors in held.items():
        parts = name.split(".") if tensors and name != ROOT else []
        for k in range(len(parts)):
            at = ".".join(parts[:k]) or ROOT
            if at in lists:
                shapes.setdefault((at, int(parts[k])), []).append(tensors)
    out = {}
    for parent in lists:
        n = len(below[parent])
        each = [tuple(sorted(shapes.get((parent, i), ()))) for i in range(n)]
        if each[0] and all(x == each[0] for x in each):
            out[parent] = (n, each[0])
        elif any(each):  # children unlike each other (a stage's first block widens): a list only index by index
            out[parent] = (n, (BY_INDEX, *each))
    return out


BY_INDEX = "each child its own"  # an indexed list's structure given child by child


def matched(torch_record: dict, paddle_record: dict) -> dict:
    """{torch list: Paddle list} of the lists that correspond (the module docstring's rule); several of one
    structure named otherwise on the two sides (each layer's experts, model.layers.N.experts against
    mixtral.layers.N.expert_list) by the child of the corresponding lists each is inside."""
    mine, theirs = indexed(torch_record), indexed(paddle_record)
    out, left = {}, []
    for kind in set(mine.values()):
        ts = [t for t, k in mine.items() if k == kind]
        ps = [p for p, k in theirs.items() if k == kind]
        if len(ts) == 1 and len(ps) == 1:
            out[ts[0]] = ps[0]
            continue
        by_name = {normal(p): p for p in ps}
        if len(by_name) == len(ps):
            out.update((t, by_name[normal(t)]) for t in ts if normal(t) in by_name)
        left.append(([t for t in ts if t not in out], [p for p in ps if p not in out.values()]))
    grown = True
    while grown:  # a list inside lists matched just now is placed by them: the outer lists first
        grown = False
        for ts, ps in left:
            t_keys = keys([t for t in ts if t not in out], {t: t for t in out})
            p_keys = keys([p for p in ps if p not in out.values()], {p: t for t, p in out.items()})
            by_place = {k: p for p, k in p_keys.items() if k}
            if len(by_place) == len(p_keys) and len(set(t_keys.values())) == len(t_keys):
                found = {t: by_place[k] for t, k in t_keys.items() if k in by_place}
                out.update(found)
                grown = grown or bool(found)
    return out


def keys(names, lists) -> dict:
    """{module name: ((list, index), ...)}: the list children it is inside (or is), outermost first, each list named
    by its torch name on both sides (lists: {this side's list: its torch name})."""
    out = {}
    for name in names:
        parts, key = name.split("."), []
        for k in range(len(parts)):
            at = ".".join(parts[:k]) or ROOT
            if at in lists and parts[k].isdigit():
                key.append((lists[at], int(parts[k])))
        out[name] = tuple(key)
    return out


def place(name: str, lists) -> tuple:
    """(list, index, the rest of the name) of the innermost list child a call is inside (or is), else None."""
    parts = name.split(".")
    for k in range(len(parts) - 1, -1, -1):
        at = ".".join(parts[:k]) or ROOT
        if at in lists and parts[k].split("#")[0].isdigit():
            index, _, call = parts[k].partition("#")
            return at, int(index), ".".join(["", *parts[k + 1:]]) + (f"#{call}" if call else "")
    return None


def inside(found, ties, left, calls, lists: dict, kinds: dict, fixed: dict) -> dict:
    """{torch call: Paddle call} inside the children of corresponding lists one side did not run (an expert no token
    reached: no order places it), paired as the run's first pass paired them inside the children both sides ran
    (found and ties: alignment._align's on the calls `left`, a tie's calls taught nothing): each list kind's (kinds:
    {torch list: its kind}) pairs of names within a child hold for every child; a kind no pair shows, by the same
    name within the child. calls: every call of each side; fixed: the pairs already kept, left as they are."""
    tied = {i for tie in ties for i in (tie[0] if isinstance(tie[0], list) else [tie[0]])}
    found = [(left[0][i].name, left[1][j].name) for i, j in found if i not in tied]
    ts, ps = calls
    template, back = {}, {q: t for t, q in lists.items()}
    for t, p in found:
        a, b = place(t, lists), place(p, back)
        if a and b and lists[a[0]] == b[0] and a[1] == b[1]:
            template.setdefault(kinds[a[0]], {}).setdefault(a[2], set()).add(b[2])
    theirs = {c.name: c for c in ps}
    out = {}
    for c in ts:
        at = place(c.name, lists)
        if at is None:
            continue
        rule = template.get(kinds[at[0]])
        rest = rule.get(at[2], set()) if rule is not None else {at[2]}
        head = "" if lists[at[0]] == ROOT else lists[at[0]] + "."
        target = theirs.get(f"{head}{at[1]}{next(iter(rest))}") if len(rest) == 1 else None
        if target is not None and bool(c.outputs) != bool(target.outputs) and target.name not in out.values() \
                and c.name not in fixed and target.name not in fixed.values():
            out[c.name] = target.name
    return out
