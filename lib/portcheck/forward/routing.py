"""A mixture of experts' routing compared as data: which experts each token reached on each side, read from the
run itself (each expert's recorded input rows, found among the router's input rows), and the weights the router's
output gives them (its softmax over the experts).

An MoE block is the parent of a list of experts that corresponds on both sides (mapping.lists.matched) and of its
router, the child whose output has one value per expert, each expert fed rows of the router's input as they are. A token that reached other experts on the
two sides is red, named at the router, unless the router's output is within its rule and its logits of the experts
the sides chose apart are equal within what the two sides' logits differ by at that token: a tie, said as one.
Where a tie was broken otherwise on the two sides, neither side is wrong, and what follows the block is not judged
on that batch. A port's router returning its top k (paddleformers' TopkRouter, its choice read with a score bias) is
compared on what both sides give: its experts and their weights against those torch's block handed its packed experts
(mapping.experts.Routed); tokens sent to other experts are red at that router, which made the choice, unless they
are at a tie of torch's router's scores, said as one as above. Its scores are its output where its block's choice is
their top k at every token of the run (a score bias or a group limit the choice reads beyond them leaves them unread:
the tie not judged, said, and those tokens red), and the two sides' difference there, the port's router giving its
top k alone, is what the measured rule allows them at that token: K times torch's own error (its scores against its
float64 run's); a token torch's float64 run routes as the port does is at a tie of torch's own two runs. The weights
of the experts chosen alike are judged as the router's output by the measured rule: torch's own error there is its
float64 run's weights (a renormalisation or a scale one side leaves out).
May import core, mapping and forward.twin's prefix."""
from dataclasses import dataclass, field

import numpy as np

from portcheck.core import calibrated, spill
from portcheck.core.diff import NOT_JUDGED, UNPAIRED
from portcheck.core.keys import module_of, split_key
from portcheck.forward.twin import F64
from portcheck.mapping import lists
from portcheck.mapping.experts import ROUTE
from portcheck.mapping.modules import META
from portcheck.mapping.ties import outputs_of
from portcheck.mapping.trace import stopped

TIED = f"{NOT_JUDGED} routing tie:"  # a row a tie broken otherwise reaches: not judged, never red
ULPS = 4  # a tie: logits apart by no more than the two sides' difference there and this many units of the last place


@dataclass
class Routing:
    """One MoE block's routing on the two sides."""
    block: str                 # the torch module holding the experts (and its router)
    paddle_block: str
    router: str                # the torch router's call: the child beside the experts with one output per expert
    experts: int               # how many
    chosen: tuple = ((), ())   # each side's [frozenset of expert indices] per token, in the router's row order
    weights: tuple = (None, None)  # each side's router softmax [tokens, experts]
    differing: list = field(default_factory=list)  # [token] that reached other experts, with no tie
    flipped: list = field(default_factory=list)    # [token] that reached other experts at a tie
    tied: int = 0              # tokens whose choice rests on a tie (chosen alike or not)
    weight_diff: float = 0.0   # the largest difference of a chosen expert's router weight between the sides
    said: str = ""             # why the routing could not be read ("" when it was)
    topk: bool = False         # read from Paddle's router's top k and the experts torch's block chose (_choices)
    weights_row: object = None  # topk: the chosen experts' weights judged (diff.KeyResult; None: no float64 run's)
    scored: bool = False       # topk: torch's router's scores read, its block's choice their top k (ties judged)
    unread: bool = False       # a choice it is asked to judge and cannot read (said): less compared, never green

    @property
    def red(self) -> bool:
        """Tokens that reached other experts with no tie, or (topk) the weights of those reached alike beyond their
        rule (routing it could not read is said, its outputs judged)."""
        return bool(self.differing) or (self.weights_row is not None and not self.weights_row.passed)

    def line(self, both=lambda name: name, step: int = 0) -> str:
        """One line: what was compared, and the first token that differs; step: the forward of compare_backward's
        step (0: the first)."""
        at = both(self.router) + (f" in step {step + 1}'s forward" if step else "")
        if self.said:
            return f"routing at {at}: not read: {self.said}"
        n, (mine, theirs) = len(self.chosen[0]), self.chosen
        ties = f"; {self.tied} token(s) at a tie" if self.tied else ""
        if self.differing and self.topk:
            t = self.differing[0]
            tie = ("no tie of torch's router's scores there" if self.scored else
                   "whether at a tie not judged: torch's block chooses by more than its router's output (a score "
                   "bias or a group limit the record does not hold)")
            return (f"routing at {at}: RED: {len(self.differing)} of {n} tokens reached other experts, the first token "
                    f"{t} torch's experts {sorted(mine[t])}, Paddle's {sorted(theirs[t])}: the experts Paddle's router "
                    f"chose (its top k) against those torch's block handed its experts{ties}; {tie} [PC941]")
        if self.red and self.topk:
            row = self.weights_row
            said = row.problem or f"max diff {row.max:.3g} > allowed {row.allowed:.3g}"
            return (f"routing at {at}: RED: each of {n} tokens reached the same experts of {self.experts}, the weights "
                    f"Paddle's router gives them differ from those torch's block handed its experts: {said} (torch's "
                    "own error: its float64 run's weights) [PC942]")
        if self.differing:
            t = self.differing[0]
            return (f"routing at {at}: RED: {len(self.differing)} of {n} tokens reached other experts, the first token "
                    f"{t} torch's experts {sorted(mine[t])}, Paddle's {sorted(theirs[t])}{ties}; no tie of the "
                    "router's logits: the port sends tokens to other experts [PC430]")
        if self.flipped:
            t = self.flipped[0]
            return (f"routing at {at}: {len(self.flipped)} of {n} tokens at a tie of the router's logits broken "
                    f"otherwise (token {t}: torch's experts {sorted(mine[t])}, Paddle's {sorted(theirs[t])}): what "
                    f"follows {both(self.block)} is not judged on this batch: neither side is wrong [PC431]")
        judged = "" if not self.topk or self.weights_row is None else \
            f" (allowed {self.weights_row.allowed:.3g}, torch's own error: its float64 run's weights)"
        return (f"routing at {at}: each of {n} tokens reached the same experts of {self.experts}, their router "
                f"weights within {self.weight_diff:.3g}{judged}{ties}")


def _rows(a) -> np.ndarray:
    a = np.asarray(a)
    return a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)


def _reached(record, tokens, expert_calls) -> list:
    """[frozenset of expert indices] per token row, from each expert's recorded input rows (None when a row is
    no token's; a row of zeros none is is skipped)."""
    where = {}
    for t, row in enumerate(tokens):
        where.setdefault(row.tobytes(), []).append(t)
    out = [set() for _ in range(len(tokens))]
    for index, call in expert_calls:
        key = f"in/{call}"
        if key not in record:
            continue
        for row in _rows(record[key]):
            found = where.get(np.ascontiguousarray(row, dtype=tokens.dtype).tobytes())
            if found is None and not np.any(row):
                continue  # no token's: paddleformers' training feeds an expert no token reached zeros (its graph kept)
            if found is None:
                return None
            for t in found:
                out[t].add(index)
    return [frozenset(s) for s in out]


def _logits(rows) -> np.ndarray:
    """A router's output rows as the log of their softmax: probabilities (transformers 5's routers softmax) as their
    log; logits less their log-sum-exp (the same softmax and order), so that one side's probabilities and the other's
    logits differ by what the two runs differ by, not by that constant (a tie's slack)."""
    x = np.asarray(rows, dtype=np.float64)
    if x.size and (x >= 0).all() and np.allclose(x.sum(-1), 1.0, rtol=0, atol=1e-4):
        with np.errstate(divide="ignore"):
            return np.log(x)
    if not x.size or not np.isfinite(x).all():
        return x
    top = x.max(-1, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(-1, keepdims=True))


def _softmax(logits) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def compare(torch_record: dict, paddle_record: dict, paired, routes: dict = None) -> list:
    """[Routing] of every MoE block the two records hold (paired: the records' pairing.Pairing; routes: torch's
    float64 run's choice of experts where the record holds none, compare_forward's)."""
    routes = routes or {}
    out = []
    if stopped(torch_record) or stopped(paddle_record):
        return out  # a run that stopped routed some tokens only: said as stopped, never read as a routing
    matched = lists.matched(torch_record, paddle_record)
    kinds = lists.indexed(torch_record)
    for t_list, p_list in matched.items():
        n = kinds[t_list][0]
        block = t_list.rpartition(".")[0]
        p_block = p_list.rpartition(".")[0]
        router = _router(torch_record, t_list, n)
        if router is None:
            continue  # a stack's layers: no router beside them
        mine = _reached(torch_record, _rows(torch_record[f"in/{router}"]), [(i, f"{t_list}.{i}") for i in range(n)])
        if mine is None:
            continue  # no mixture of experts: its children are not fed the rows its router reads (a stack beside a head)
        r = Routing(block, p_block, router, n)
        p_router = paired.pairs.get(router)
        if p_router is None:
            r.said = f"Paddle has no counterpart of the router {router}"
            out.append(r)
            continue
        if f"in/{p_router}" not in paddle_record:
            continue  # the Paddle router never ran: its rows are judged (and said) as missing
        top = _top_k(outputs_of(paddle_record, p_router)), *(_kept(torch_record, f"{ROUTE}{t_list}") or (None, None))
        where = None  # the choice of torch's it is asked to judge against and cannot read
        if all(x is not None for x in top) and top[0][0].shape == top[1].shape:
            # a port's router returning its top k (its choice read with a score bias), against the experts torch's
            # block hands its packed experts: the choice and its weights compared, expert by expert, the weights
            # against its float64 run's (none in a later step's forward: its weights unjudged)
            twin = _kept(routes, f"{F64}{ROUTE}{t_list}") or _kept(torch_record, f"{F64}{ROUTE}{t_list}")
            twin = twin if twin is not None and twin[0].shape == top[1].shape else None
            if twin is not None or not (routes or next((True for k in torch_record if k.startswith(F64)), False)):
                out.append(_choices(r, top, twin, _scores(torch_record, router, routes)))
                continue
            where = f"{t_list} in its float64 run"
        elif top[0] is not None and top[1] is None and not any(mine):
            where = t_list  # torch's experts packed (no expert's rows recorded) and no choice of theirs kept
        if where is not None:
            r.said, r.unread = (f"torch's record holds no choice of experts its block handed {where} that can be "
                                "read, which Paddle's router's top k is judged against: not green; record torch's side "
                                "again with this version's record_forward or record_backward [PC943]"), True
            out.append(r)
            continue
        theirs = _reached(paddle_record, _rows(paddle_record[f"in/{p_router}"]),
                          [(i, f"{p_list}.{i}") for i in range(n)])
        if theirs is None or len(theirs) != len(mine):
            r.said = f"Paddle's experts are not fed rows of its router {p_router}'s input as they are"
            out.append(r)
            continue
        logits = [_logits(_rows(outputs_of(rec, c)[0])) for rec, c in ((torch_record, router), (paddle_record, p_router))]
        if logits[0].shape != logits[1].shape:  # a port's router returning its top k, not a value per expert
            r.said = (f"Paddle's router {p_router} returns {list(logits[1].shape)} where torch's returns one value per "
                      f"expert {list(logits[0].shape)}")
            out.append(r)
            continue
        if not any(mine) and any(theirs):
            # torch's experts ran as one call (packed, mapping.experts: no expert's rows recorded): its choice is the
            # one its block handed them (Routed), or where none was kept its router's top experts, as many per token
            # as Paddle's reached (a near-tie its own run broke otherwise is then read as a tie)
            k = max(len(x) for x in theirs)
            handed = top[1] if top[1] is not None and len(top[1]) == len(theirs) else None
            mine = [frozenset(int(e) for e in row) for row in handed] if handed is not None else \
                [frozenset(int(e) for e in np.argsort(-row, kind="stable")[:k]) for row in logits[0]]
        chosen = mine, theirs
        r.chosen = tuple(chosen)
        r.weights = tuple(_softmax(x) for x in logits)
        for t, (a, b) in enumerate(zip(*chosen)):
            tie = _tie(logits[0][t], float(np.abs(logits[0][t] - logits[1][t]).max()), a, b, len(a))
            r.tied += bool(tie)
            if a != b:
                (r.flipped if tie else r.differing).append(t)
            elif a:
                r.weight_diff = max(r.weight_diff, float(np.abs(r.weights[0][t, sorted(a)] -
                                                                r.weights[1][t, sorted(a)]).max()))
        out.append(r)
    return out


def _kept(record, key: str):
    """(the experts [tokens, k], their weights) Routed kept under `key` in a record (a saved file's: integers and
    floats of one 2-D shape), else None."""
    index, weights = (record.get(k) for k in (key, f"{key}:weights"))
    if index is None or weights is None:
        return None
    index, weights = np.asarray(index), np.asarray(weights)
    ok = index.ndim == 2 and index.shape == weights.shape and index.dtype.kind in "iu" and weights.dtype.kind == "f"
    return (index, weights) if ok else None


def _top_k(outputs: list):
    """(the experts [tokens, k], their weights) a router returning its top k gives (an integer output and a float one
    of its shape), else None."""
    index = next((np.asarray(o) for o in outputs if np.ndim(o) == 2 and np.asarray(o).dtype.kind in "iu"), None)
    weights = next((np.asarray(o) for o in outputs if index is not None and np.shape(o) == index.shape and
                    np.asarray(o).dtype.kind == "f"), None)
    return None if weights is None else (index, weights)


def _choices(r: Routing, top, twin=None, scores=None) -> Routing:
    """r with each token's experts and their weights compared: Paddle's router's top k (top[0]) against torch's
    block's (top[1], top[2]); the weights of the experts chosen alike judged by the measured rule, twin: torch's float64
    run's (its experts, their weights), its own error (a token it routes otherwise: the float32 weights there).
    scores: _scores' (torch's router's scores, the sides' difference at each token) a token chosen otherwise is
    judged a tie on (_tie), where its block's choice is their top k at every token; a token torch's float64 run routes
    as the port does is at a tie of torch's own runs."""
    (index, weights), mine, mine_w = top
    r.topk = True
    r.chosen = tuple([frozenset(int(e) for e in row) for row in x] for x in (mine, index))
    r.scored = scores is not None and scores[0].shape == (len(mine), r.experts) and \
        all(_follows(row, apart, a) for row, apart, a in zip(*scores, r.chosen[0]))
    exact = [frozenset(int(e) for e in row) for row in twin[0]] if twin is not None else [None] * len(mine)
    alike = []  # [(torch's weights, float64's, Paddle's)] per token chosen alike, in torch's expert order
    for t, (a, b) in enumerate(zip(*r.chosen)):
        tie = (r.scored and _tie(scores[0][t], scores[1][t], a, b, len(a))) or (a != b and exact[t] == b)
        r.tied += bool(tie)
        if a != b:
            (r.flipped if tie else r.differing).append(t)
            continue
        order = [int(e) for e in mine[t]]
        theirs = dict(zip(map(int, index[t]), np.asarray(weights[t], np.float64)))
        wide = dict(zip(map(int, twin[0][t]), np.asarray(twin[1][t], np.float64))) if twin is not None else {}
        row = np.asarray(mine_w[t], np.float64)
        alike.append((row, [wide.get(e, w) for e, w in zip(order, row)] if set(wide) == a else row,
                      [theirs[e] for e in order]))
        r.weight_diff = max([r.weight_diff] + [abs(x - theirs[e]) for e, x in zip(order, row)])
    if twin is not None and alike:
        a, ref, b = (np.array(x, dtype=np.float32 if i != 1 else np.float64) for i, x in enumerate(zip(*alike)))
        r.weights_row = calibrated.measure(f"{r.router} (routing weights)", a, ref, b)
    return r


def _scores(record: dict, router: str, routes: dict):
    """(torch's router's scores [tokens, experts] as _logits gives them, what the two sides' may differ by at each
    token [tokens]) of the router's first output, or None. The port's router gives its top k alone: the difference is
    the one the measured rule allows there, calibrated.K times torch's own error at the token (its scores against its
    float64 run's, routes' or the record's); none where no float64 run's are held (a later step's forward: ULPS
    alone)."""
    key = _output_key(record, router)
    if key is None or np.ndim(record[key]) < 1:
        return None
    mine = _logits(_rows(record[key]))
    wide = routes.get(F64 + key, record.get(F64 + key))
    if wide is None or np.shape(wide) != np.shape(record[key]):
        return mine, np.zeros(len(mine))
    with np.errstate(invalid="ignore"):
        own = np.nan_to_num(np.abs(mine - _logits(_rows(wide))), nan=0.0, posinf=0.0)  # -inf on both: equal
    return mine, calibrated.K * own.max(-1)


def scored(record: dict) -> set:
    """The out/ keys of each mixture of experts' router in a torch record (compare's rule): the scores a port's router
    returning its top k is judged a tie on (_scores), whose float64 run's compare_forward keeps beside its choice."""
    out = set()
    for experts, (n, _) in lists.indexed(record).items():
        router = _router(record, experts, n)
        key = _output_key(record, router) if router else None
        out |= {key} if key else set()
    return out


def _output_key(record: dict, call: str):
    """The record key of a call's first output (None: the record holds none)."""
    return next((k for k in record if k.startswith("out/") and split_key(k)[1] == call), None)


def _router(record: dict, experts: str, n: int):
    """The call of the router beside a list of n experts: its block's child, run once, outside the list, whose
    first output has one value per expert and whose input is recorded; None where the list has no block (a stack's
    layers) or none is."""
    block, seen = experts.rpartition(".")[0], set()
    if not block:
        return None
    for key in record:
        if not key.startswith("out/"):
            continue
        call = split_key(key)[1]
        module = module_of(call)
        if call in seen or "#" in call or module.rpartition(".")[0] != block or module == experts \
                or module.startswith(experts + "."):
            continue
        seen.add(call)  # its first output alone
        shape = spill.shape(record, key)
        if len(shape) and shape[-1] == n and f"in/{call}" in record:
            return call
    return None


def watched(record: dict) -> set:
    """The modules one side's routing is read from, from its record of one forward (its mod/ keys and calls): each
    mixture of experts' router and experts (compare's rule), which compare_backward records in every step's forward
    after the first (in_step)."""
    out = set()
    for experts, (n, _) in lists.indexed(record).items():
        router = _router(record, experts, n) or _choosing(record, experts)
        calls = [(i, f"{experts}.{i}") for i in range(n)]
        if router is not None and _reached(record, _rows(record[f"in/{router}"]), calls) is not None:
            out |= {module_of(router), *(call for _, call in calls)}
    return out


def _choosing(record: dict, experts: str):
    """The call of a router returning its top k beside a list of experts (_top_k: paddleformers' TopkRouter), its
    block's child outside the list, or None."""
    block = experts.rpartition(".")[0]
    calls = {split_key(k)[1] for k in record if k.startswith("out/")}
    return next((c for c in sorted(calls) if "#" not in c and module_of(c).rpartition(".")[0] == block and block and
                 module_of(c) != experts and f"in/{c}" in record and _top_k(outputs_of(record, c)) is not None), None)


STEP = "routed{}/"  # STEP.format(i) + "in/<call>", "out/<call>": step i's forward of compare_backward, the watched


def in_step(record: dict, step: int) -> dict:
    """A backward record's step `step` forward as compare reads it: its watched modules' keys, and what pairing
    records of each module (mod/ keys)."""
    prefix = STEP.format(step)
    return {**{k: v for k, v in record.items() if k.startswith(META)},
            **{k[len(prefix):]: v for k, v in record.items() if k.startswith(prefix)}}


def _slack(mine, apart: float) -> float:
    """What two experts' logits of a token may be apart by and be at a tie: the sides' difference there and ULPS."""
    return apart + ULPS * float(np.spacing(np.float32(np.abs(mine).max())))


def _follows(mine, apart: float, a: frozenset) -> bool:
    """Whether the experts a are a top k of a token's logits (within _slack): the choice those logits make."""
    rest = [e for e in range(len(mine)) if e not in a]
    return not a or not rest or float(mine[sorted(a)].min()) >= float(mine[rest].max()) - _slack(mine, apart)


def _tie(mine, apart: float, a: frozenset, b: frozenset, k: int) -> bool:
    """Whether a token's choice rests on a tie: torch's logits (mine) of the experts one side chose and the other did
    not are equal within apart, the sides' difference at that token, and ULPS; or, chosen alike, the k-th and the next
    are."""
    slack = _slack(mine, apart)
    if a != b:  # as many experts on each side, each one chosen apart level with one the other side chose
        return len(a) == len(b) and all(abs(mine[i] - mine[j]) <= slack for i in a - b for j in b - a)
    if not 0 < k < len(mine):
        return False
    order = np.sort(mine)[::-1]
    return bool(order[k - 1] - order[k] <= slack)


def after(torch_record: dict, block: str) -> set:
    """The torch calls a block's routing reaches: the block's, its children's, and every one recorded after its
    input."""
    keys = [k for k in torch_record if k.startswith(("in/", "out/"))]
    inside = lambda call: module_of(call) == block or module_of(call).startswith(block + ".")
    first = next((i for i, k in enumerate(keys) if inside(split_key(k)[1])), None)
    return set() if first is None else {split_key(k)[1] for k in keys[first:] if k.startswith("out/")}


def unjudged_after_ties(routed: list, torch_record: dict, rows: list, isolated=False) -> list:
    """rows, each one a tie broken otherwise reaches (a block's flipped tokens, none red) said as not judged, within
    its rule or not: neither side is wrong there, and no rule holds two choices of experts to each other (torch's
    float64 yardstick may break the tie otherwise too, and its allowance then holds the other experts' difference).
    The router's own output comes before the choice: it stays judged (a row with no counterpart stays as it is, and
    says nothing of the router: a port's router returning its top k has none of torch's). isolated: isolate's rows,
    each module on torch's values: only the block and what it holds are reached (Paddle's router breaks the tie
    again). A tie is one only where the router's own output is within its rule: a router whose logits differ (its
    weight wrong) sends those tokens elsewhere by its own difference, and they are red (differing)."""
    alone = lambda row: row.problem.startswith(UNPAIRED)  # nothing of the port's compared with it: no verdict on it
    red = {split_key(f"out/{row.name}")[1] for row in rows if not row.passed and not alone(row)}
    for r in routed:
        if r.router in red and not isolated:  # the sides' logits apart: no slack from them makes a tie
            r.differing, r.flipped, r.tied = sorted(r.differing + r.flipped), [], 0
    reached = {}
    for r in routed:
        if r.flipped and not r.red:
            calls = after(torch_record, r.block)
            inside = lambda call: module_of(call) == r.block or module_of(call).startswith(r.block + ".")
            reached.update(dict.fromkeys((c for c in calls if module_of(c) != module_of(r.router) and
                                          (inside(c) or not isolated)), r))
    if not reached:
        return rows
    out = []
    for row in rows:
        r = reached.get(split_key(f"out/{row.name.removesuffix(' (its input)')}")[1]) \
            if row.judged and not alone(row) else None
        out.append(row if r is None else calibrated.unjudged(
            row.name, row.shape, f"{TIED} {len(r.flipped)} token(s) at a tie of {r.router}'s logits, broken "
            "otherwise by the two sides, reach it (routing)"))
    return out
