"""Layer-by-layer diagnosis: which module is the first whose outputs differ between the twins.

The twins share module names (bert.embeddings, bert.encoder.layer.3.attention.output, ...),
so each framework's forward script records the outputs of the same named modules, in
the order they run, with its own hooks; this module diffs the two recordings and
prints the table. It is the guide's manual bisection (print a middle block, compare,
move forward or back) done for every block at once.
"""
import re

import numpy as np

# Embeddings, each layer's self-attention (context), attention block output, feed-forward
# intermediate and layer output, then pooler and classifier.
WATCHED = re.compile(r"^(bert\.embeddings|bert\.encoder\.layer\.\d+\.(attention\.self|attention\.output|intermediate|output)"
                     r"|bert\.pooler|classifier)$")


def watched(named_modules) -> list:
    """[(name, module)] of the modules worth recording, from model.named_modules()/named_sublayers()."""
    return [(name, m) for name, m in named_modules if WATCHED.match(name)]


def table(torch_data: dict, paddle_data: dict, tolerance: float) -> tuple:
    """Rows (module, shape, max, mean, relative, marker) in forward order, and the first module over tolerance.

    Keys are "<input>/<module>" in the order the modules ran (dicts keep insertion order).
    relative = max abs diff / max abs value of the torch output.
    """
    rows, first = [], None
    for key in paddle_data.keys() - torch_data.keys():
        rows.append((key, str(paddle_data[key].shape), "missing in torch", "", "", "<-- differs"))
        first = first or key
    for key, t in torch_data.items():
        p = paddle_data.get(key)
        if p is None or p.shape != t.shape:
            rows.append((key, str(t.shape), "shape" if p is not None else "missing in paddle", "", "", "<-- differs"))
            first = first or key
            continue
        d = np.abs(t.astype("float64") - p)
        mx, mean = float(d.max()), float(d.mean())
        rel = mx / max(float(np.abs(t).max()), 1e-30)
        over = not mx <= tolerance
        if over and first is None:
            first = key
        rows.append((key, str(tuple(t.shape)), f"{mx:.3e}", f"{mean:.3e}", f"{rel:.3e}",
                     "<-- first over tolerance" if key == first else ("over" if over else "")))
    return rows, first


def format_table(rows) -> list:
    header = ("module", "shape", "max abs diff", "mean abs diff", "relative", "")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
