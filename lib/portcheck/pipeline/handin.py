"""A hand-in judged as the guide judges it, with this project's strict verdict beside it.

The guide's verdict is reprod_log's own rule (ReprodDiffHelper.compare_info + report): the two dicts
must hold the same keys; per key, an array whose shape differs but whose transpose matches is
transposed, the rest broadcast, and the key passes when mean |torch - paddle| <= the pair's threshold.
It is recomputed here the way reprod_log computes it, so a contestant sees the verdict the guide gives,
as the one result type (diff.CheckResult of diff.KeyResult) with reprod_log's rule as its rule value
(tolerances.ReprodLog) and its quirks on each key's notes.
Where reprod_log is blind (it passes NaN, transposes and broadcasts) the strict verdict says so: max abs
diff within the same threshold, no NaN or Inf, equal shapes (a 0-d scalar and [1] are one scalar),
equal dtypes, no key missing on either side, integers exactly equal.

A contestant's `<pair>_diff.log` (reprod_log's format) is read back and held against the pair: every
key's logged value must be the recomputed one, so a hand-edited log or one made from other files shows.

This module holds the folder and the pair: the pairs found in a hand-in (find_pairs, last_run), a pair judged by
the rule measured on the model (MeasuredVerdict, judge_measured), written (save_side), judged and logged
(judge_and_log) and handed in (hand_in). The guide's rule, the strict one and the diff log read back are
portcheck.pipeline.guide; the files of torch's runs across a kink beside a pair, portcheck.pipeline.kink_files.
Imports core, forward.compare, gradients.backward (lazily) and pipeline's data, steps, guide, kink_files and
whole.
"""
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from portcheck.core import calibrated, diff, page, record, report, tolerances
from portcheck.pipeline import bound_page, data, steps, whole
from portcheck.forward.twin import F64
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy, read_json, save_npy, shown, writable
from portcheck.core.keys import ROOT
from portcheck.pipeline.guide import (BP_ALIGN, bp_key, describe_guide, describe_strict, guide_verdict, handed_in,
                                      largest_mean, non_finite, pair_name, stopped, strict_verdict)
from portcheck.pipeline.kink_files import BOUND, BRANCH, TAKEN, load_kinks, save_kinks
from portcheck.pipeline.kink_files import save_taken  # noqa: F401 (documented here: PC116's message names it)

SUFFIX = {"torch": "_torch.npy", "paddle": "_paddle.npy"}
DIAGNOSTICS = report.DIAGNOSTICS


def ours(folder) -> Path:
    """folder/diagnostics/ if portcheck wrote it (it holds run records or a float64 run), else None: a contestant's
    own diagnostics/ folder (their per-layer dumps, their own JSON) is theirs, read as any other sub-folder, never
    as our verdicts, records or float64 runs."""
    below = Path(folder) / DIAGNOSTICS
    try:
        with os.scandir(below) as entries:
            return below if any(e.name.endswith((record.SUFFIX, EXACT)) for e in entries) else None
    except OSError:  # none, a file, unreadable
        return None


def checks_gone(folder, pair: str) -> str:
    """Why a pair this project wrote (its run records in folder/diagnostics/) is not as its check left it: the diff
    log or the verdict it wrote beside the pair is gone, and with them what ties the files to that pair (another
    pair's files and records copied in their place stay green otherwise). "" when both are there."""
    folder = Path(folder)
    gone = [name for name in (f"{pair}_diff.log", f"{DIAGNOSTICS}/{pair}_diff.json")
            if not os.path.lexists(folder / name)]
    return f"{' and '.join(gone)} missing: the pair's check writes them; run its check again" if gone else ""


def last_run(folder) -> dict:
    """{pair (or a record's stem): why its files cannot be taken for one run with the rest} in a hand-in portcheck
    wrote: a step its last run did not pass (diagnostics/steps.json, written by portcheck.pipeline.steps.run: Ctrl-C, a
    failure or a kill left an earlier run's files in place), a run record naming another script than the step
    table's for its side, and records of other weights than the rest of the hand-in's (runs on two models)."""
    below, problems = ours(folder), {}
    if below is None:
        return problems
    path = below / steps.MANIFEST
    if path.exists() or path.is_symlink():
        try:
            table = [(str(s["name"]), s["status"], dict(s["pairs"]))
                     for s in read_json(path, record.RECORD_BYTES, follow=False)["steps"]]
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as e:
            why = f"no {e} field" if isinstance(e, KeyError) else report.one_line(str(e))
            return {steps.MANIFEST: f"{DIAGNOSTICS}/{steps.MANIFEST} is not a record of a run ({why}); rerun the pipeline"}
        for name, status, pairs in table:
            for pair, writers in pairs.items():
                if status != "passed":
                    problems[pair] = (f"{report.one_line(name)} was {report.one_line(str(status))} in the last run "
                                      f"({DIAGNOSTICS}/{steps.MANIFEST}): its files may be an earlier run's; rerun the "
                                      "pipeline")
                    continue
                for side in diff.SIDES if isinstance(writers, dict) else ():
                    try:
                        rec = record.load(None, below / f"{pair}_{side}{record.SUFFIX}")
                    except PipelineError:  # the pair's own verdict says so
                        rec = None
                    if rec is not None and rec.get("script") != writers.get(side):
                        problems[pair] = (f"its {side} run record names {record.shown(rec.get('script'))}, the step "
                                          f"table's {side} script is {record.shown(writers.get(side))}: one side's "
                                          "files are another script's; rerun the pipeline")
    weights = {}  # the weights each record ran on: {fingerprint: [record stems]}
    for path in sorted(below.glob(f"*{record.SUFFIX}")):
        try:
            rec = record.load(None, path)
        except PipelineError:
            continue
        if rec is not None and isinstance(rec["depends"].get("weights"), str):  # None: not a regular file
            stem = path.name[:-len(record.SUFFIX)].rsplit("_", 1)[0]
            weights.setdefault(rec["depends"]["weights"], []).append(stem)
    if len(weights) > 1:
        runs = sorted(weights.items(), key=lambda kv: -len(kv[1]))
        main_stems = sorted(set(runs[0][1]))
        for fingerprint, stems in runs[1:]:
            for stem in sorted(set(stems)):
                problems.setdefault(stem, f"ran on other weights ({fingerprint[:12]}) than "
                                          f"{', '.join(main_stems[:3])} ({runs[0][0][:12]}): the hand-in mixes runs on "
                                          "two models; rerun the pipeline [PC109]")
    return problems


_TAGGED = re.compile(r"^(.+?)_(torch|paddle)_([^_].*)\.npy$")  # <name>_<framework>_<tag>.npy, a contestant's naming


def find_pairs(folder, max_depth: int = 4, max_files: int = 20000) -> dict:
    """{pair name: {"torch": path, "paddle": path, "log": path or None}} for every <name>_torch.npy with a
    <name>_paddle.npy (or <name>_torch_<tag>.npy with <name>_paddle_<tag>.npy, the pair <name>) in a hand-in folder: beside each other, or anywhere in it when the name is unique
    (some hand-ins keep one folder per framework). Links to folders are not followed; a name found in
    several sub-folders is named by its sub-folder. A side without its twin is listed under "unpaired", and
    whatever the walk could not read (a folder unreadable or too deep, too many files) under "unread"."""
    folder, found, seen, unread = Path(folder), {"torch": {}, "paddle": {}, "log": {}}, 0, []
    for root, dirs, files in os.walk(folder, followlinks=False,
                                     onerror=lambda e: unread.append(f"{shown(e.filename, folder)} could not be read ({e.strerror})")):
        if seen > max_files:  # a folder of a million files is not a hand-in: judge what was found first
            unread.append(f"more than {max_files} files: the rest was not read")
            break
        depth = len(Path(root).relative_to(folder).parts)
        if depth >= max_depth and dirs:
            unread.append(f"{shown(root, folder)}/ holds folders deeper than {max_depth} levels, not read")
            dirs[:] = []
        if depth == 0 and DIAGNOSTICS in dirs and ours(folder):
            dirs.remove(DIAGNOSTICS)  # a portcheck hand-in's diagnostics/: run records and companions, no pair
        for f in files:
            seen += 1
            if seen > max_files:
                break
            for side, suffix in (*SUFFIX.items(), ("log", "_diff.log")):
                if f.endswith(suffix) and len(f) > len(suffix):
                    found[side].setdefault((f[:-len(suffix)], ""), []).append(Path(root) / f)
                    break
            else:
                tagged = _TAGGED.match(f)  # forward_torch_resnet18.npy: the pair forward, tagged
                if tagged:
                    found[tagged.group(2)].setdefault((tagged.group(1), tagged.group(3)), []).append(Path(root) / f)
    pairs, unpaired = {}, []
    for (name, tag), torch_paths in sorted(found["torch"].items()):
        paddle_paths = found["paddle"].get((name, tag), [])
        for t in torch_paths:
            twin = [p for p in paddle_paths if p.parent == t.parent]
            twin = twin or (paddle_paths if len(torch_paths) == len(paddle_paths) == 1 else [])
            if len(twin) != 1:
                unpaired.append(t)
                continue
            # a tagged pair is its name's when no other pair holds that name, else name_tag
            stem = name if not tag or (name, "") not in found["torch"] else f"{name}_{tag}"
            logs = found["log"].get((stem, ""), []) or found["log"].get((f"{name}_{tag}", ""), [])
            log = next((g for g in logs if g.parent in (t.parent, twin[0].parent)), logs[0] if len(logs) == 1 else None)
            key = stem if len(torch_paths) == 1 else f"{t.parent.relative_to(folder).as_posix()}/{stem}"
            pairs[key] = {"torch": t, "paddle": twin[0], "log": log}
    paired = {p["paddle"] for p in pairs.values()}
    unpaired += [p for paths in found["paddle"].values() for p in paths if p not in paired]
    return {"pairs": pairs, "unpaired": unpaired, "unread": unread}


# An align hand-in (portcheck/, examples/): diagnostics/<pair>_torch64.npy holds torch's float64 run of the pair's
# keys, so the rule measured on the model (portcheck/calibrated.py) is re-derived from the folder alone.
EXACT = "_torch64.npy"
GENERATE = "generate"  # Handin.generate's pair: its tokens judged as compare_generate judges its choices


@dataclass
class MeasuredVerdict(page.Viewable):
    """A pair judged by the guide's rule and by the rule measured on the model, with the strict one beside."""
    name: str
    guide: diff.CheckResult    # guide_verdict's: each key by tolerances.ReprodLog at `threshold`
    rows: list                 # [diff.KeyResult] per key, by the measured rule
    strict: diff.CheckResult
    same_run: tuple            # (True, False or None, detail)
    threshold: float           # the pair's: the guide's rule and the strict verdict are held to it
    kind: str = "computed"     # tolerances.KINDS: computed pairs are measured on the model, the others are not
    first: object = None       # an exact pair's first difference (portcheck.pipeline.data.Difference), None when equal
    also: tuple = ()           # [(name, passed, detail)]: conditions judged beside the pair (a training's curves)
    bounds: dict = None        # an exact pair's {key: (ulps, the difference they allow)}, by the key's dtype
    spread: float = 0.0        # an outcome's: the part of `threshold` that is torch's own spread on this machine

    @property
    def measured_passed(self) -> bool:
        """computed: every key within the rule measured on the model; exact: every value equal; outcome: the
        task's threshold (the guide's rule), as no float64 run of a training exists."""
        if self.kind == "exact":  # values, shapes, dtypes and keys: the first difference, in the record's order
            return bool(self.guide.keys) and not stopped(self.guide) and self.first is None
        if self.kind == "outcome":
            return bool(self.guide.keys) and self.guide.passed
        return bool(self.rows) and all(r.passed for r in self.rows)

    @property
    def passed(self) -> bool:
        """Green: the guide's rule, the measured rule, the same run proven, and no NaN or Inf."""
        return (self.guide.passed and self.measured_passed and self.same_run[0] is True and not non_finite(self.strict)
                and all(passed for _, passed, _ in self.also))

    def describe_measured(self) -> str:
        rule = tolerances.said(tolerances.ulps_of(self.name))
        if self.kind == "exact" and self.first is not None:
            return f"exact RED ({rule}, same shapes and dtypes: first difference at {self.first.describe()}) [PC105]"
        if self.kind != "computed":
            largest = largest_mean(self.guide.keys)
            what = (f"exact: {rule}, same shapes and dtypes" if self.kind == "exact" else
                    f"outcome: mean <= {self._rule()}, no float64 run of a training")
            return (f"{self.kind} {'green' if self.measured_passed else 'RED'} ({what}"
                    + (f"; largest: {largest.key} max {largest.max:.3g}" if largest else "; no keys") + ")"
                    + ("" if self.measured_passed else " [PC149]"))
        bad = diff.first_diverging(self.rows)
        worst = bad or max(self.rows, key=lambda r: r.ratio, default=None)
        if worst is None:
            return "measured RED (no keys) [PC106]"
        if bad and not bad.problems and bad.max_ok:  # red by the bound on the mean alone: that bound said, not the max
            return f"measured RED (failed: {bad.name} {self._by_mean(bad)}) [PC107]"
        return (f"measured {'RED' if bad else 'green'} ({'failed: ' if bad else 'largest: '}{worst.name} "
                f"{worst.problem or worst.key_figures()})" + (" [PC108]" if bad else ""))

    def _by_mean(self, r) -> str:
        """A row red by the bound on its mean, its max within the measured allowance: the bound that decided, the
        mean against it, torch's own fp32 error on the mean beside it, then the max."""
        whose = "the guide's" if guide_rule_of(self.name, self.threshold, self.kind) else "the caller's"
        own = f"torch's own fp32 error on the mean here is {r.own_mean:.3g}"
        # the bound in the floor's units (calibrated.FLOOR's: one rounding is eps32 x the value): under one, a
        # single float32 rounding at this value crosses it (a loss near 15, a language model's at its start)
        units = r.mean_bound / (calibrated.EPS32 * r.scale) if r.scale > 0 and math.isfinite(r.scale) else math.inf
        return (f"by {whose} bound {r.mean_bound:g} on the mean: mean {r.mean:.3g} > {r.mean_bound:g}; {own}"
                + (": no port can meet this bound" if r.own_mean > r.mean_bound else
                   f"; the bound is {units:.2g} x eps32 x max|torch| {r.scale:.3g}: one float32 rounding at this "
                   "value can cross it" if units < 1 else "")
                + f"; its max {r.max:.3g} is within the measured allowance {r.allowed:.3g}")

    def _rule(self) -> str:
        """An outcome's threshold as its diff log says it: the guide's, the task's, or the task's widened."""
        if guide_rule_of(self.name, self.threshold, self.kind):
            return f"the guide's {self.threshold:g}"
        return tolerances.task_rule(self.threshold, self.spread)

    @property
    def _largest(self) -> float:
        return max((k.scale for k in self.strict.keys if math.isfinite(k.scale)), default=0.0)

    def view(self) -> dict:
        """The page's data (portcheck.core.page): the pair's three rules' verdicts and its run's, then each key by
        the measured rule and by the guide's, worst first, then its diff log's lines."""
        said = [(self.guide.passed, describe_guide(self.guide, self.threshold, spread=self.spread)),
                (self.measured_passed, self.describe_measured()), (self.strict.passed, describe_strict(
                    self.strict, self.threshold)), (self.same_run[0], f"same run: {self.same_run[-1]}")]
        keys = [("measured", self.rows), ("the guide's", self.guide.keys)]
        return {"title": f"{self.name}_diff", "passed": self.passed, "first": None,
                "headline": f"{self.name}: " + ("green" if self.passed else "red"),
                "verdicts": [{"name": self.name, "passed": ok, "text": text} for ok, text in said],
                "sections": [{"kind": "table", "title": f"each key by {how} rule, worst first", "rows":
                              report.figures(rows, self.name)} for how, rows in keys if rows]
                + [{"kind": "lines", "title": "its diff log", "lines": [m for m, _ in self.messages()]}]}

    def messages(self) -> list:
        """The diff log: reprod_log's format first (what readers of the guide's logs and parse_diff_log
        read), then the verdicts, then one verdict line; [(message, echo to stdout)]."""
        out = []
        guide = {k.key: k for k in self.guide.keys}
        # an outcome judged at a task's threshold above the guide's says so; "the guide's rule" only where it is
        said = tolerances.looser_task(self.name, self.threshold, self.spread) or ("the guide's rule" if guide_rule_of(
            self.name, self.threshold, self.kind) else "the caller's rule, not the guide's")
        guide_rule = f"{self.threshold:g} ({said})"
        for g in (self.guide.keys if self.kind != "computed" else ()):
            ulps, bound = (self.bounds or {}).get(g.key, (0, 0.0)) if self.kind == "exact" else (0, self.threshold)
            out += report.key_lines(g.key, (g.passed, g.mean, guide_rule), (g.max <= bound, g.max, f"{bound:g} (" + (
                f"exact within {ulps} ulps of {self._largest:.17g}" if ulps else self.kind) + ")"))
        for r in self.rows:
            g = guide.get(r.name)
            if g is None:
                out += report.key_lines(r.name, notes=[r.problem or stopped(self.guide)])
                continue
            # the max line's word is the max's own verdict: a mean over its bound is said on the mean line
            out += report.key_lines(r.name, (g.passed, g.mean, guide_rule), (r.max_ok and not r.problems, g.max, (
                f"{r.allowed:.3e} (measured: {r.multiple:g} x torch's own fp32 error {r.err32:.3e} + "
                f"{calibrated.roundings(r.shape):.3g} x eps32 x max|torch| {r.scale:.3e})" + (f"; {r.problem}" if r.problem else ""))))
        out = [(line, True) for line in out]
        same = {True: "passed", False: "FAILED", None: "not proven"}[self.same_run[0]]
        out += [(f"same run: {same}, {self.same_run[1]}", True),
                (describe_guide(self.guide, self.threshold, spread=self.spread), True),
                (self.describe_measured(), True),
                (describe_strict(self.strict, self.threshold) + ", shown beside, not a condition", True)]
        out += [(line, True) for line in self.also_lines()]
        out += [(f"diff check {'passed' if self.passed else 'failed'}", True)]
        return out

    def also_lines(self, red_only: bool = False) -> list:
        """The checks judged beside the pair (also=), one line each (a red one with its code); red_only: the red."""
        return [f"{name}: {'green' if passed else 'RED'} ({detail}){'' if passed else ' [PC150]'}"
                for name, passed, detail in self.also if not (red_only and passed)]


def guide_rule_of(name: str, threshold: float, kind: str) -> bool:
    """Whether a pair is judged by the guide's own rule: a pair of its table, at its threshold, as its kind (or a
    pair it does not name, at reprod_log's default)."""
    guide = tolerances.GUIDE.get(name)
    return threshold == tolerances.guide_threshold(name) and (guide is None or kind == guide.kind)


def judge_measured(name: str, torch_file, paddle_file, exact_file, records=(None, None, None),
                   threshold: float = None, k: float = calibrated.K, kind: str = "computed",
                   taken: dict = None, branch: dict = None) -> MeasuredVerdict:
    """An align pair from its files: torch, Paddle and (a computed pair) torch's float64 run, each with its run
    record (beside it, or at `records`). The float64 run must be the torch side's own: a torch record bound to
    its file, depending on what the torch result depends on. An exact or outcome pair has none. taken: {key:
    figure} (load_taken), torch against its run taking Paddle's side of a kink, allowed SPREAD x as judge_backward
    allows it; branch: {key: array} (load_taken(..., BRANCH)), torch's run on Paddle's branch of the first forward's
    kinks, which the measured rule judges in torch's place, its float64 run moved by as much (the guide's and the
    strict verdicts stay the files')."""
    threshold = tolerances.guide_threshold(name) if threshold is None else threshold
    t, p = load_npy(torch_file), load_npy(paddle_file)
    same = record.same_run(torch_file, paddle_file, records[:2])
    rows, tied = [], []
    if kind == "computed":
        e = load_npy(exact_file)
        if name == GENERATE:  # a near-tie the two sides choose apart is a tie, as compare_generate judges it
            from portcheck.generation.steps import handed_choices
            p, tied = handed_choices(t, p, e)
        problem = same[0] and record.twin_problem(torch_file, exact_file, (records[0], records[2]))
        if problem:
            same = (False, problem + "; re-run the torch side")
        from portcheck.gradients.kinks import TAKING, moved_with
        branch = branch or {}
        rows = calibrated.judge_pair({**t, **branch}, p, {**e, **moved_with(branch, t, e)}, threshold, k)
        for r in rows:  # where that run is further from torch's than torch's spread against itself, it decides
            if (taken or {}).get(r.name, 0.0) > r.rule.spread:
                calibrated.with_spread(r, taken[r.name], TAKING)
    ulps = tolerances.ulps_of(name)
    first = data.first_difference(t, p, ulps) if kind == "exact" else None
    allowed = tolerances.rounding(t.values(), ulps)
    dtypes = {k: np.asarray(v).dtype for k, v in t.items()}
    bounds = {k: (tolerances.ulps_in(d, ulps), allowed[d]) for k, d in dtypes.items() if d in allowed}
    return MeasuredVerdict(name, guide_verdict(t, p, threshold, name), rows, strict_verdict(t, p, threshold, name), same,
                           threshold, kind, first, also=tuple(tied), bounds=bounds)


# Writing a hand-in through the library (align's records, any model): what the checker above judges.
# The guide's reprod_log pairs from align's records, with run records: what a hand-in is made of.
#
# Each side's script saves its own half (save_side): <pair>_<framework>.npy, a dict of arrays as reprod_log
# writes it, with its run record beside it; the torch side also saves <pair>_torch64.npy, torch's float64
# run of the same keys, so the rule measured on the model (portcheck/calibrated.py) can be re-derived later.
# The check judges the three files (portcheck.pipeline.handin.judge_measured), writes <pair>_diff.log in reprod_log's
# format, and hand_in copies the pair and its log into a log_reprod/ folder (records and the float64 run
# into its diagnostics/), which pipeline/check_log_reprod.py re-checks from the folder alone.
#
#     rec = portcheck.record_forward(model, images)                          # either framework
#     handin.save_side(out, "forward", "torch", {"logits": handin.model_output(rec)},
#                      depends, script, exact={"logits": handin.model_output(rec, exact=True)})


def checked_threshold(value, what: str) -> float:
    """A threshold a caller or a hand-in gives: a finite number > 0, else one line naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise PipelineError(f"{what} must be a finite number > 0, got {value!r} [PC112]")
    return float(value)


def model_output(rec: dict, exact: bool = False) -> np.ndarray:
    """The model's own output in a record_forward (its first tensor: a ModelOutput's logits, or the tensor)."""
    prefix = (F64 if exact else "") + f"out/{ROOT}"
    key = next((k for k in rec if k == prefix or k.startswith((prefix + "[", prefix + ":"))), None)
    if key is None:
        raise PipelineError("the record holds no model output: write it with portcheck.record_forward [PC113]")
    return rec[key]


def per_step(rec: dict, kind: str, exact: bool = False) -> dict:
    """{"<kind>_0": ..., "<kind>_1": ...} from a record_backward's loss/<i> or lr/<i>: the guide's bp_align
    and lr pairs."""
    prefix = (F64 if exact else "") + f"{kind}/"
    return {f"{kind}_{k[len(prefix):]}": v for k, v in rec.items() if k.startswith(prefix)}


def numeric_arrays(arrays, what: str) -> dict:
    """A dict of str keys to numeric numpy arrays (reprod_log's format), else one line naming the first bad value. A
    torch or Paddle tensor is taken as its values (a copy, data.to_numpy): each side's script saves its own
    framework's tensors, and neither framework is imported here."""
    if not isinstance(arrays, dict):
        raise PipelineError(f"{what} must be a dict of numpy arrays, got a {type(arrays).__name__} [PC115]")
    arrays = {k: data.to_numpy(v, f"{what}[{report.one_line(repr(k))[:40]}]") if _tensor(v) else v
              for k, v in arrays.items()}
    for key, value in arrays.items():
        if not isinstance(key, str) or not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
            raise PipelineError(f"{what}[{report.one_line(repr(key))[:40]}] is a {type(value).__name__}"
                                f"{'' if not isinstance(value, np.ndarray) else ' of ' + str(value.dtype)}: give "
                                "numeric numpy arrays (np.asarray(value)) [PC119]")
    return arrays


def _tensor(value) -> bool:
    """A torch or Paddle tensor (read by its methods: the caller's framework is never imported here)."""
    return not isinstance(value, np.ndarray) and callable(getattr(value, "numpy", None)) and hasattr(value, "shape")


def bp_align(rec: dict, exact: bool = False) -> dict:
    """The guide's bp_align pair from a record_backward, carrying what compare_backward judges each step by: its
    loss, its lr and a digest of its update (weights/<i>: each weight's mean |update|, sorted; backward.updates;
    with BatchNorm, running/<i>: its running means', backward.running_means),
    so that the hand-in checker re-derives the in-process verdict from the folder (a loss alone can agree while
    the updates differ: an optimizer's epsilon); exact=True: torch's float64 run of them, and beside it torch's
    spread against itself where its plain run measured it (calibrated.SPREAD_OF keys)."""
    out = {k: v for kind in BP_ALIGN for k, v in per_step(rec, kind, exact).items()}
    if exact:
        from portcheck.gradients.against_itself import spread_of
        for key in rec:
            spread = spread_of(rec, key) if bp_key(key) else None
            if spread is not None:
                out[f"{calibrated.SPREAD_OF}{bp_key(key)}"] = np.array([spread])
    return out


def save_side(folder, pair: str, framework: str, arrays: dict, depends: dict, script: str, exact: dict = None):
    """<folder>/<pair>_<framework>.npy and its run record; with `exact` (the torch side), <pair>_torch64.npy
    and its record too. depends: what must be equal on both sides (weights, inputs, flags fingerprints)."""
    folder, pair = Path(folder), pair_name(pair)
    if framework not in SUFFIX:
        raise PipelineError(f"framework={report.one_line(repr(framework))[:40]}: one of {', '.join(SUFFIX)} [PC117]")
    arrays = numeric_arrays(arrays, "arrays")
    if exact is not None:
        exact = numeric_arrays(exact, "exact")
    path = folder / f"{pair}_{framework}.npy"
    for target in (path, *([folder / f"{pair}{EXACT}"] if exact is not None else [])):  # all before the first write
        writable(target)
        writable(record.path_for(target))
    save_npy(path, arrays)
    # the float64 run's own keys (torch's spread against itself), declared in the torch record: a yardstick put in
    # its place (another side's result relabelled) lacks them
    record.save(path, framework, script, depends, [k for k in exact or () if k.startswith(calibrated.SPREAD_OF)])
    if exact is not None:
        save_npy(folder / f"{pair}{EXACT}", exact)
        record.save(folder / f"{pair}{EXACT}", framework, script, depends)
    return path


def judge_and_log(folder, pair: str, threshold: float = None, tables=(), after_steps: bool = False, top=None,
                  kind: str = None, also=(), comparison=None, spread: float = 0.0):
    """Judge <folder>/<pair>_{torch,paddle,torch64}.npy and write <pair>_diff.log (tables after the verdict
    line, where reprod_log's readers stop) and the rule it was judged by, <pair>_diff.json, which the hand-in
    checker reads back. threshold: the pair's bound on each key's mean (default: the guide's for a pair it
    names, else reprod_log's 1e-6); after_steps: the keys come after a backward or optimizer steps, so the
    measured rule allows K_BACKWARD; kind: "computed" (a float64 run of the torch side is required), "exact"
    (data, labels, lr: every value equal) or "outcome" (a training result: the task's threshold, no float64
    run); default: the guide's for a pair it names, else computed; top: the hand-in folder to copy the judged pair into (hand_in), checked
    before anything is written; also: [(name, passed, detail)] judged beside the pair, part of its one verdict (a
    training's curves); comparison: a ForwardReport or BackwardReport drawn into it (hand_in's), and where it was
    judged with torch's run taking Paddle's side of a kink (backward.judged), that run's figures written beside the
    pair (save_taken) and judged with, as the hand-in checker judges them from the folder; spread: an
    outcome's threshold widened by torch's own runs on this machine (portcheck.pipeline.training), judged at threshold +
    spread and declared as the task's threshold and the spread, so a reviewer's checker reads the task's.
    Returns the MeasuredVerdict."""
    folder, pair = Path(folder), pair_name(pair)
    a_comparison(comparison)
    check_outputs(folder, [pair], top)
    threshold = tolerances.guide_threshold(pair) if threshold is None else checked_threshold(threshold, "threshold")
    k, kind = calibrated.multiple(after_steps), tolerances.kind_of(pair, kind)
    torch_file, paddle_file = handed_in(folder, pair)[:2]
    diverged = save_kinks(folder, pair, comparison) if kind == "computed" else []
    used, said = load_kinks(folder, pair, torch_file, paddle_file, record.path_for(torch_file)) \
        if kind == "computed" else ({}, [])
    said = diverged + said
    verdict = judge_measured(pair, torch_file, paddle_file, folder / f"{pair}{EXACT}", threshold=threshold + spread,
                             k=k, kind=kind, taken=used.get(TAKEN), branch=used.get(BRANCH))
    verdict.also, verdict.spread = (*verdict.also, *also), spread
    tables = [*said, *tables]
    report.write_messages(verdict.messages() + [(line, False) for line in tables], folder / f"{pair}_diff.log")
    report.write_json({"name": pair, "passed": verdict.passed, "threshold": threshold, "k": k, "kind": kind,
                       **({"own_spread": spread} if spread else {})},
                      report.verdict_path(folder / f"{pair}_diff.log"))
    if top is not None:
        hand_in(folder, pair, top, comparison)
    return verdict


def a_comparison(comparison):
    """comparison= of judge_and_log and hand_in: a report that draws itself (ForwardReport, BackwardReport) or None;
    anything else one line, before anything is written."""
    if comparison is not None and not callable(getattr(comparison, "plot", None)):
        raise PipelineError(f"comparison={report.one_line(repr(comparison))[:40]}: give compare_forward's "
                            "ForwardReport or judge_backward's BackwardReport, or None [PC118]")


def check_outputs(folder, pairs, top=None):
    """Every file judge_and_log(folder, pair, top=top) writes for each of `pairs`, checked as a place to write
    (no link in any component, writable) before the first is written: a check that judges several pairs
    calls it once for all of them first, so a refusal leaves every earlier result as it was."""
    folder = Path(folder)
    for pair in pairs:
        log = folder / f"{pair}_diff.log"
        writable(log)
        writable(report.verdict_path(log))
        if top is not None:
            report.hand_in_folder(top, *handed_in(folder, pair), diagnostics=_diagnostics(folder, pair))
            whole.writable_targets(folder, pair, top)


def _diagnostics(folder: Path, pair: str) -> list:
    """A pair's files its check writes beside it for diagnostics/: torch's float64 run, its kinks' runs (BOUND)."""
    return [folder / f"{pair}{suffix}" for suffix in (EXACT, *BOUND)]


PLOT = "_modules.png"  # <pair>_modules.png: a comparison's picture (forward.plot), beside the pair's diagnostics


def hand_in(folder, pair: str, top, comparison=None) -> str:
    """Copy a judged pair from a step's folder into a log_reprod/ folder `top`: the pair and its diff log at
    the top, the run records and the float64 run in top/diagnostics/ (and TAKEN, where its check judged with that
    run; each side's whole record, where `folder` keeps it: whole.hand_in). comparison: the pair's ForwardReport or
    BackwardReport (compare_forward's, judge_backward's), drawn as
    <pair>_modules.png beside the pair and handed in with its diagnostics when matplotlib is installed, and its
    page (portcheck.core.page) left as top/diagnostics/report.html. Returns
    the plot's line, naming the picture where the hand-in holds it ("" without a comparison)."""
    folder, pair = Path(folder), pair_name(pair)
    a_comparison(comparison)
    drawn, said = [], ""
    viewed = callable(getattr(comparison, "view", None))
    if viewed:  # its page beside the pictures: checked before anything is written
        page.writable_page(Path(top) / report.DIAGNOSTICS / page.NAME)
    if comparison is not None:
        said = comparison.plot(folder / f"{pair}{PLOT}")
        drawn = [folder / f"{pair}{PLOT}"] if said.startswith("plot:") else []
    report.hand_in(*handed_in(folder, pair), diagnostics=[*_diagnostics(folder, pair), *drawn], top=top)
    whole.hand_in(folder, pair, top)  # each side's whole record behind the pair, where the sides keep it
    if viewed:
        bound_page.write(comparison.view(), top)  # bound to the folder as handed in
    return f"plot: {Path(top) / report.DIAGNOSTICS / drawn[0].name}" if drawn else said
