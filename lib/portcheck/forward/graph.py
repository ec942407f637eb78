"""The two runs' graphs in Google's Model Explorer's graph JSON, written without Model Explorer (portcheck.explorer
shows them): every module call a node, namespaced by the module hierarchy; an edge only where the run handed one
call's output tensor itself to a later call (flow: by the record's identity of stored arrays, as trace links them),
never from the order of modules; each node's attributes its class, shapes and settings (mapping.settings, as the
record keeps them), its data its ratio to the allowance, cumulative and isolated.

A paired call has one id on both sides (torch's call name), so Model Explorer's "match node id" navigation maps
each node to its pair as the pairing found it; a call left unpaired is "torch:<call>" or "paddle:<call>".
May import core and mapping only (a report is read by its fields, never imported)."""
import json
import math
import os
from pathlib import Path

from portcheck.core import page, spill
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import atomic_write, claim_folder, writable
from portcheck.core.keys import ROOT, module_of, split_key

INPUT = "(input)"  # the node of the model's own input
SIDES = ("torch", "paddle")
FILES = {side: f"{side}.json" for side in SIDES}  # each side's graph; Model Explorer names a model by its file
DATA = {(side, how): f"{side}_{how}.json" for side in SIDES for how in ("cumulative", "isolated")}
MARK = ".portcheck-graphs"  # in a folder of graphs this writes (fileio.claim_folder): its files may be written again
MAPPING = "mapping.json"  # the pairs, in Model Explorer's upload format ({"mapping": {left id: right id}})
OVER = 1e30  # a red row with no finite ratio (NaN, a shape or dtype mismatch): over every threshold
THRESHOLDS = [{"value": 1, "bgColor": "#a5d6a7"}, {"value": 1e300, "bgColor": "#ef9a9a"}]  # within 1, over it


def flow(record) -> dict:
    """Which call's output each call was handed, as the run did it: {"in": {call: [the calls whose output tensor
    its first input is, in run order]}, "out": {call: [the calls before it that returned the same tensor]}}; the
    model's own input is INPUT. Read from the record's identity of stored arrays (trace links a tensor recorded
    before to its first key, spill keeps the link on disk): a record saved to and loaded from files has none."""
    made, out = {}, {"in": {}, "out": {}}
    for key in record:
        if not key.startswith(("in/", "out/")):
            continue
        kind, call, rest = split_key(key)
        ident = spill.identity(record, key)
        before = list(made.get(ident, []))
        if kind == "in" and not rest:
            out["in"][call] = before
            if call == ROOT:
                made.setdefault(ident, []).append(INPUT)
        elif kind == "out":
            out["out"].setdefault(call, before)
            made.setdefault(ident, []).append(call)
    return out


def _path(call: str) -> list:
    """A call's module path; a "/" in a name (its author's text) is no layer of Model Explorer's: said as U+2215."""
    module = module_of(call)
    return [] if module == ROOT else [part.replace("/", "\u2215") for part in module.split(".")]


def _node(side: str, call, ids: dict, container: bool, producers: list, attrs: dict) -> dict:
    parts = _path(call.name)
    # a container is a layer; its node is its output, inside it
    namespace = "/".join(parts if container else parts[:-1])
    label = (parts[-1] if parts else ROOT) + (" (output)" if container else "") + \
        (f" #{call.name.split('#')[1]}" if "#" in call.name else "")
    edges = [{"sourceNodeId": ids[p], "sourceNodeOutputId": "0", "targetNodeInputId": "0"}
             for p in producers[-1:] if p in ids]
    said = {"class": call.kind or "?", "call": call.name, "output shapes": " ".join(map(str, call.outputs)) or "-",
            "tensors held": " ".join(map(str, call.tensors)) or "-", **attrs}
    if not edges and not container:
        said["input"] = "no module's output: a value its caller's forward computed, or a buffer"
    return {"id": ids[call.name], "label": label, "namespace": namespace,
            "attrs": [{"key": k, "value": str(v)} for k, v in said.items()], "incomingEdges": edges}


def _values(rows: list) -> dict:
    """{torch call: its worst ratio to the allowance} of a report's figure rows."""
    out = {}
    for row in rows:
        call = split_key(f"out/{row['name']}")[1]
        value = row.get("of allowed")
        value = value if isinstance(value, (int, float)) and math.isfinite(value) else \
            OVER if page.tone(row) == "red" else None
        if value is not None:
            out[call] = max(out.get(call, value), value)
    return out


def graphs(report, figures: list, isolated: list) -> dict:
    """{file name: its JSON data} of a ForwardReport: each side's graph (FILES), each side's node data cumulative
    and isolated (DATA), and the pairs (MAPPING). figures, isolated: the report's figure rows (report.figures)."""
    pairing, flows = report.pairing, report.flow
    pairs = dict(pairing.pairs)
    back = {p: t for t, p in pairs.items()}
    values = {"cumulative": _values(figures), "isolated": _values(isolated)}
    out = {}
    for side in SIDES:
        calls = pairing.torch_calls if side == "torch" else pairing.paddle_calls
        other = pairs if side == "torch" else back
        ids = {c.name: (c.name if side == "torch" else back[c.name]) if c.name in other else f"{side}:{c.name}"
               for c in calls}
        ids[INPUT] = INPUT
        ran = [c for c in calls if c.outputs]
        # a module that ran with children: a layer; with -1 (the record does not say), a node of its own
        layers = {c.module for c in ran if c.children > 0}
        sides = flows.get(side, {"in": {}, "out": {}})
        nodes = [{"id": INPUT, "label": INPUT, "namespace": "", "attrs": [], "incomingEdges": []}]
        for c in ran:
            container = c.module in layers
            producers = sides["out"].get(c.name, []) if container else sides["in"].get(c.name, [])
            torch_call = c.name if side == "torch" else back.get(c.name)
            # its settings (a LayerNorm's eps, GELU's approximation) as its record keeps them: an eps that differs
            # shows in the side panel of each side's node
            attrs = {**report.settings.get(side, {}).get(c.module, {}),
                     "paired with": (pairs.get(c.name) if side == "torch" else torch_call) or "nothing"}
            for how in ("cumulative", "isolated"):
                if torch_call in values[how]:
                    attrs[f"ratio to allowance, {how}"] = f"{values[how][torch_call]:.3g}"
            nodes.append(_node(side, c, ids, container, producers, attrs))
        out[FILES[side]] = {"label": f"{side}", "graphs": [{"id": side, "nodes": nodes}]}
        for how in ("cumulative", "isolated"):
            results = {ids[t if side == "torch" else pairs[t]]: {"value": v} for t, v in values[how].items()
                       if (side == "torch" and t in ids) or (side == "paddle" and pairs.get(t) in ids)}
            out[DATA[side, how]] = {side: {"name": f"ratio to allowance, {how}", "results": results,
                                           "thresholds": THRESHOLDS}}
    out[MAPPING] = {"mapping": {t: t for t in pairs}}
    return out


def write(report, figures: list, isolated: list, folder) -> list:
    """graphs() written into `folder` (made if missing); the paths written, each side's graph first. A file of
    those names is overwritten only in a folder this writes (its MARK, fileio.claim_folder's: a regular file, never
    a link): never one the project did not write, never through a link."""
    folder = writable(folder, folder=True)
    names = (*FILES.values(), *DATA.values(), MAPPING)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            mine = claim_folder(fd, MARK, names)
        finally:
            os.close(fd)
    except OSError as e:
        raise PipelineError(f"{folder} cannot be written ({e.strerror or e}): choose another path [PC210]") from None
    if not mine:
        taken = next((n for n in (MARK, *names) if os.path.lexists(folder / n)), MARK)
        raise PipelineError(f"{folder / taken} exists and portcheck did not write it: give a new or empty "
                            "folder for the graphs [PC192]")
    written = []
    for name, data in graphs(report, figures, isolated).items():
        text = json.dumps(data, ensure_ascii=False, indent=1)
        atomic_write(folder / name, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        written.append(folder / name)
    return written
