"""A comparison as one self-contained HTML page: inline CSS and script, its data embedded as JSON, nothing fetched.

A report (ForwardReport, BackwardReport, StreamReport, a hand-in's check) gives its data as a dict, `view()`; this
module formats it, never parses text back out of a report. The page opens from disk in any browser, offline: its
Content-Security-Policy forbids every fetch (no CDN, no font, no image), so it works the same on a reviewer's
laptop and in a notebook (_repr_html_). Every name in it is escaped: a module's name is the model author's
text and may hold markup, and is shown as the terminal shows it (errors.one_line: a bidirectional override, a control
character, a line separator or a byte that was not UTF-8 as its escape), each in an element of its own (<bdi>), so no
name can reorder or stand in for the verdict word, which comes first in the header.

The data (page(data)):
    title, passed (bool), headline (one line), first ({"torch": name, "paddle": name} or None),
    folder and run (a page written into a hand-in: its folder and the seal of its manifest, record.manifest_seal),
    verdicts [{"name", "passed" (True, False or None: not judged), "text"}],
    sections [{"kind": "tree" | "table" | "curves" | "lines", "title", ...}]:
        tree:   rows [row], isolated {torch name: row} (each module on torch's own values), first: a row's name;
        table:  rows [row] (shown worst first);
        curves: curves [{"name", "x": [...], "torch": [...], "paddle": [...]}];
        lines:  lines [text];
    a row: report.figures()'s dict, and "paddle" (Paddle's name where it differs).
"""
import html
import json
import math
import os
import re
from pathlib import Path

from portcheck.core.errors import PipelineError, one_line
from portcheck.core.fileio import atomic_write, open_regular, writable
from portcheck.core.keys import ROOT

NAME = "report.html"  # the page a writer leaves in a hand-in's diagnostics/, beside the PNGs
SIGNATURE = "<!-- written by portcheck: a comparison's page -->"  # the mark of a page this project may overwrite
MESSAGES = "docs/messages.md"  # each message code's entry: linked, never fetched
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
       "connect-src 'none'; form-action 'none'; base-uri 'none'")
CODE = re.compile(r"\[PC(\d{3})\]")
OPEN_LIMIT = 400  # a green page opens its tree's top levels only past this many rows (a 7B model's thousands)


def _finite(value):
    """JSON holds no NaN or Infinity: a non-finite figure is said as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
        return _finite(value.item())
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def embedded(data: dict) -> str:
    """The data as JSON safe inside a <script> element: no '<', '>' or '&' survives to close it; ASCII, so a name
    holding a byte that was not UTF-8 (a surrogate escape) is written as its escape, never a write that stops."""
    text = json.dumps(_finite(data), ensure_ascii=True)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _e(text) -> str:
    return html.escape(one_line(text), quote=True)


def _bdi(text) -> str:
    """A name the user gave, escaped, in an element of its own: its letters laid out apart from what stands around
    it (a right-to-left name cannot carry the verdict word along)."""
    return f"<bdi>{_e(text)}</bdi>"


def linked(text: str, messages: str = MESSAGES) -> str:
    """Lines escaped (each as errors.one_line shows it), each message code a link to its entry on the messages
    page."""
    return "\n".join(CODE.sub(lambda m: f'<a class="code" href="{_e(messages)}#pc{m.group(1)}">[PC{m.group(1)}]</a>',
                              _e(line)) for line in str(text).split("\n"))


def _num(x) -> str:
    if isinstance(x, float):
        return f"{x:.3e}" if math.isfinite(x) else str(x)
    return "" if x is None else str(x)


def used(row) -> float:
    """A row's max diff over its allowance (NaN where it has no bound on the max)."""
    value = row.get("of allowed") if row else None
    return value if isinstance(value, (int, float)) else float("nan")


def tone(row) -> str:
    """A row's colour class: red (over its rule, or a problem), not judged, or by its share of the allowance."""
    if row is None:
        return "none"
    if row.get("verdict") == "RED":
        return "red"
    if row.get("verdict") == "not judged":
        return "nj"
    share = used(row)
    return "ok" if not share == share or share <= 0.1 else "near" if share <= 0.5 else "warm"


def _module(name: str) -> str:
    return re.split(r"[#\[:]", name, maxsplit=1)[0]


class _Node:
    def __init__(self, path: str):
        self.path, self.rows, self.children = path, [], {}

    def child(self, part: str):
        path = f"{self.path}.{part}" if self.path else part
        return self.children.setdefault(part, _Node(path))

    def worst(self) -> float:
        shares = [used(r) for r in self.rows] + [c.worst() for c in self.children.values()]
        shares = [s for s in shares if s == s]
        return max(shares, default=float("nan"))

    def red(self) -> bool:
        return any(tone(r) == "red" for r in self.rows) or any(c.red() for c in self.children.values())


def tree(rows: list) -> _Node:
    """The rows nested as the model nests its modules (a name's dotted path; the model's own rows at the top)."""
    top = _Node("")
    for row in rows:
        module = _module(row["name"])
        node = top
        if module != ROOT:
            for part in module.split("."):
                node = node.child(part)
        node.rows.append(row)
    return top


def _cells(row, iso) -> str:
    def ratio(r):
        share = used(r)
        return f'<span class="ratio {tone(r)}">{_num(share) if share == share else "-"}</span>' if r else \
            '<span class="ratio none">-</span>'
    paddle = row.get("paddle") or ""
    said = f'<span class="pd">Paddle: {_e(paddle)}</span>' if paddle and paddle != row["name"] else ""
    return (f'<span class="nm">{_e(row["name"])}{said}</span>'
            f'{ratio(row)}{ratio(iso)}<span class="sh">{_e(row.get("shape", ""))}</span>'
            f'<span class="fg">{_num(row.get("max diff"))}</span>'
            f'<span class="fg">{_num(row.get("mean diff"))}</span>'
            f'<span class="fg">{_num(row.get("allowed"))}</span>'
            f'<span class="src">{_e(row.get("rule", ""))}</span>'
            + (f'<span class="why">{_e(row["why"])}</span>' if row.get("why") else ""))


def _row(row, iso, first) -> str:
    mark = ' id="first-diverging"' if first is not None and row["name"] == first else ""
    return (f'<div class="row {tone(row)}{" first" if mark else ""}"{mark} data-module="{_e(row["name"])}" '
            f'data-used="{_e(_num(used(row)))}">{_cells(row, iso)}</div>')


def _node_html(node: _Node, isolated: dict, first, opened: set, depth: int) -> str:
    rows = "".join(_row(r, isolated.get(r["name"]), first) for r in node.rows)
    children = "".join(_node_html(c, isolated, first, opened, depth + 1) for c in node.children.values())
    if not node.children:
        return rows if rows else ""
    is_open = " open" if node.path in opened else ""
    worst = node.worst()
    badge = f'<span class="badge {"red" if node.red() else "ok"}">{_num(worst) if worst == worst else "-"}</span>'
    return (f'<details class="node"{is_open} data-path="{_e(node.path)}"><summary>'
            f'<span class="nm">{_e(node.path.rsplit(".", 1)[-1])}</span>{badge}</summary>'
            f'<div class="kids">{rows}{children}</div></details>')


def _opened(rows: list, first) -> set:
    """The modules whose nodes open: each ancestor of the first diverging row alone (the rows after it are red by
    what it carries: a 7B model's 15 later blocks open would bury it); with none, of every red row on a small page;
    else the top level only."""
    names = [first] if first else [r["name"] for r in rows if tone(r) == "red"] if len(rows) <= OPEN_LIMIT else []
    out = {""}
    for name in names:
        parts = _module(name).split(".")
        out.update(".".join(parts[:i + 1]) for i in range(len(parts)))
    if not names:
        out.update({r["name"].split(".")[0] for r in rows} if len(rows) <= OPEN_LIMIT else set())
    return out


def _tree_section(s: dict) -> str:
    rows, isolated, first = s["rows"], s.get("isolated") or {}, s.get("first")
    top = tree(rows)
    opened = _opened(rows, first)
    body = "".join(_row(r, isolated.get(r["name"]), first) for r in top.rows)
    body += "".join(_node_html(c, isolated, first, opened, 1) for c in top.children.values())
    head = ('<div class="row head"><span class="nm">module (torch)</span>'
            '<span class="ratio">cumulative / allowance</span><span class="ratio">isolated / allowance</span>'
            '<span class="sh">shape</span><span class="fg">max diff</span>'
            '<span class="fg">mean diff</span><span class="fg">allowance</span><span class="src">its source</span>'
            '</div>')
    return f'<div class="tree">{head}{body}</div>'


def _table_section(s: dict) -> str:
    rows = sorted(s["rows"], key=lambda r: (tone(r) != "red", -used(r) if used(r) == used(r) else math.inf))
    cols = ("step", "name", "shape", "max diff", "mean diff", "allowed", "of allowed", "verdict", "rule")
    head = "".join(f'<th data-col="{i}">{_e(c)}</th>' for i, c in enumerate(cols))
    first = s.get("first")
    body = "".join(f'<tr class="{tone(r)}{" first" if r["name"] == first else ""}"'
                   + (' id="first-diverging"' if r["name"] == first else "")
                   + f' data-module="{_e(r["name"])}">' + "".join(
        f'<td data-v="{_e(_num(r.get(c)))}">{_e(_num(r.get(c)))}</td>' for c in cols) + "</tr>" for r in rows)
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _points(xs, ys, box) -> str:
    x0, x1, y0, y1 = box
    sx = (lambda x: 40 + 540 * (x - x0) / (x1 - x0)) if x1 > x0 else (lambda x: 310.0)
    sy = (lambda y: 150 - 130 * (y - y0) / (y1 - y0)) if y1 > y0 else (lambda y: 85.0)
    return " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys) if x == x and y == y and abs(y) < math.inf)


def svg(curve: dict) -> str:
    """A curve of both sides and their difference, inline SVG (no image file): torch solid, Paddle dashed."""
    xs = [float(x) for x in curve["x"]]
    t, p = [float(v) for v in curve["torch"]], [float(v) for v in curve["paddle"]]
    d = [abs(a - b) for a, b in zip(t, p)]
    out = []
    for title, series in ((f"{curve['name']}: torch and Paddle", (t, p)), (f"{curve['name']}: |torch - Paddle|", (d,))):
        finite = [v for s in series for v in s if math.isfinite(v)]
        box = (min(xs, default=0), max(xs, default=1), min(finite, default=0), max(finite, default=1))
        lines = "".join(f'<polyline class="s{i}" fill="none" points="{_points(xs, s, box)}"/>'
                        for i, s in enumerate(series if len(series) > 1 else ()))
        if len(series) == 1:
            lines = f'<polyline class="s2" fill="none" points="{_points(xs, series[0], box)}"/>'
        out.append(f'<svg class="curve" viewBox="0 0 600 175" role="img"><title>{_e(title)}</title>'
                   f'<text x="40" y="14">{_e(title)} (max {_num(box[3])}, min {_num(box[2])})</text>'
                   f'<line x1="40" y1="150" x2="580" y2="150" class="axis"/>{lines}</svg>')
    return "".join(out)


def _section(s: dict) -> str:
    kind = s["kind"]
    body = _tree_section(s) if kind == "tree" else _table_section(s) if kind == "table" else \
        "".join(svg(c) for c in s["curves"]) if kind == "curves" else \
        "<pre>" + "\n".join(linked(line) for line in s["lines"]) + "</pre>"
    return f'<section class="sec-{_e(kind)}"><h2>{_e(s["title"])}</h2>{body}</section>'


STYLE = """
body{font:13px/1.45 system-ui,sans-serif;margin:0;color:#222}
header{padding:10px 16px;color:#fff}header.green{background:#2e7d32}header.red{background:#b71c1c}
header h1{font-size:17px;margin:0}main{padding:8px 16px}
.verdicts div{margin:2px 0;padding:3px 6px;border-left:5px solid #aaa;font-family:monospace;white-space:pre-wrap}
.verdicts .v-true{border-color:#2e7d32}.verdicts .v-false{border-color:#c62828;background:#fdecea}
.row{display:grid;grid-template-columns:minmax(220px,2fr) 85px 85px 100px 85px 85px 85px minmax(150px,1.6fr);
gap:6px;padding:1px 4px;font-family:monospace;align-items:baseline}
.row .why{grid-column:1/-1;color:#8a1c1c;font-size:12px}.row .pd{display:block;color:#555;font-size:11px}
.row.head{font-weight:bold;font-family:system-ui;border-bottom:1px solid #999}
.red{background:#f8c4c4}.row.red,.ratio.red{color:#7f0000}.near{background:#fff4c2}.warm{background:#ffd9a8}
.ok{background:#e6f4e7}.nj{background:#ddd}.first{outline:2px solid #b71c1c}
details.node{margin-left:14px}details.node>summary{cursor:pointer;font-family:monospace}
.kids{margin-left:10px;border-left:1px dotted #bbb}
.badge{margin-left:8px;padding:0 4px;border-radius:3px;font-size:11px}
table{border-collapse:collapse;font-family:monospace}td,th{padding:1px 6px;border-bottom:1px solid #eee}
th{cursor:pointer;text-align:left}svg.curve{width:600px;height:175px;display:block;margin:6px 0;background:#fafafa}
svg .s0{stroke:#1f6fb5;stroke-width:1.5}svg .s1{stroke:#d9480f;stroke-width:1.5;stroke-dasharray:5 3}
svg .s2{stroke:#6a1b9a;stroke-width:1.5}svg .axis{stroke:#999}svg text{font:11px sans-serif}
.hidden{display:none}#search{margin:6px 0;padding:3px;width:320px}.call{font-family:monospace;white-space:pre-wrap}
"""

SCRIPT = """
(function(){
var q=document.getElementById('search');
function match(el,t){var m=el.getAttribute('data-module')||'';return !t||m.toLowerCase().indexOf(t)>=0;}
q&&q.addEventListener('input',function(){
 var t=q.value.trim().toLowerCase();
 document.querySelectorAll('.tree .row[data-module], table.sortable tr[data-module]').forEach(function(el){
  var on=match(el,t);el.classList.toggle('hidden',!on);
  if(on&&t){for(var d=el.parentElement;d;d=d.parentElement){if(d.tagName==='DETAILS')d.open=true;}}
 });
});
document.querySelectorAll('table.sortable').forEach(function(tb){
 tb.querySelectorAll('th').forEach(function(th){th.addEventListener('click',function(){
  var i=+th.getAttribute('data-col'),body=tb.tBodies[0],rows=[].slice.call(body.rows);
  var up=th.getAttribute('data-up')!=='1';th.setAttribute('data-up',up?'1':'0');
  rows.sort(function(a,b){var x=a.cells[i].getAttribute('data-v'),y=b.cells[i].getAttribute('data-v');
   var nx=parseFloat(x),ny=parseFloat(y);if(!isNaN(nx)&&!isNaN(ny))return up?nx-ny:ny-nx;
   return up?x.localeCompare(y):y.localeCompare(x);});
  rows.forEach(function(r){body.appendChild(r);});
 });});
});
var sort=document.getElementById('sort-ratio');
sort&&sort.addEventListener('click',function(){
 document.querySelectorAll('.tree').forEach(function(tr){
  var rows=[].slice.call(tr.querySelectorAll('.row[data-module]'));
  rows.sort(function(a,b){var x=parseFloat(a.getAttribute('data-used')),y=parseFloat(b.getAttribute('data-used'));
   return (isNaN(y)?-1:y)-(isNaN(x)?-1:x);});
  var flat=document.createElement('div');flat.className='tree flat';
  rows.forEach(function(r){var c=r.cloneNode(true);c.removeAttribute('id');flat.appendChild(c);});
  var old=tr.parentElement.querySelector('.tree.flat');if(old)old.remove();
  tr.parentElement.appendChild(flat);tr.classList.add('hidden');
 });
 sort.disabled=true;
});
var f=document.getElementById('first-diverging');
if(f&&f.getBoundingClientRect().bottom>window.innerHeight){f.scrollIntoView({block:'center'});}
})();
"""


def page(data: dict, messages: str = MESSAGES) -> str:
    """The page's whole text (see the module's docstring for `data`)."""
    first = data.get("first")
    verdicts = "".join(f'<div class="v-{str(v.get("passed")).lower()}">{linked(v["text"], messages)}</div>'
                       for v in data.get("verdicts", []))
    call = data.get("first_call")
    calls = "".join(f'<div class="call"><b>{_e(side)}</b>: {_e(line)}</div>' for side, line in call.items()) \
        if call else ""
    where = (f' <span id="header-module">first diverging: {_bdi(first["torch"])}'
             + (f' (Paddle: {_bdi(first["paddle"])})' if first.get("paddle") not in (None, first["torch"]) else "")
             + "</span>") if first else ""
    state = "green" if data.get("passed") else "red"
    bound = (f'<div id="bound">hand-in folder {_bdi(data["folder"])}, run {_e(str(data.get("run"))[:12])} (the seal of '
             'its diagnostics/manifest.json): a page of that run alone</div>'
             if data.get("folder") is not None else "")
    return (f'<!DOCTYPE html>\n{SIGNATURE}\n<html lang="en" dir="ltr"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width"><title>{_e(data.get("title", "portcheck"))}</title>'
            f'<style>{STYLE}</style></head><body>'
            f'<header class="{state}" data-verdict="{state}" dir="ltr"><h1>'
            f'<span id="verdict">{"GREEN" if data.get("passed") else "RED"}</span> {_bdi(data.get("title", ""))}'
            f'{where}</h1><div>{linked(data.get("headline", ""), messages)}</div>{bound}</header><main>'
            f'<section class="verdicts"><h2>verdict</h2>{verdicts}{calls}</section>'
            f'<input id="search" type="search" placeholder="search a module by name">'
            f' <button id="sort-ratio" type="button">sort by ratio</button>'
            + "".join(_section(s) for s in data.get("sections", []))
            + f'</main><script type="application/json" id="portcheck-data">{embedded(data)}</script>'
            f'<script>{SCRIPT}</script></body></html>\n')


class Viewable:
    """A report that shows itself as a page: its view() gives the data; html(path) writes the page, and a
    notebook shows it (_repr_html_)."""

    def view(self) -> dict:
        raise NotImplementedError

    def html(self, path) -> str:
        """The comparison as one page at `path`: opens offline, fetches nothing; a line saying where."""
        return write(self.view(), path)

    def _repr_html_(self) -> str:
        return framed(page(self.view()))


def framed(text: str, height: int = 640) -> str:
    """A page inside a notebook's output: in a sandboxed iframe of its own (scripts run, nothing else), so its style
    and script touch the page alone, and its Content-Security-Policy holds there."""
    return (f'<iframe sandbox="allow-scripts" style="width:100%;height:{height}px;border:1px solid #ccc" '
            f'srcdoc="{html.escape(text, quote=True)}"></iframe>')


def ours(path) -> bool:
    """Whether `path` holds a page this project wrote (its first lines carry SIGNATURE): the only file a writer
    replaces. Read for that mark alone, never for what it says."""
    try:
        with open_regular(path, follow=False) as f:
            return SIGNATURE.encode() in f.read(256)
    except OSError:
        return False


DATA_OPEN, DATA_CLOSE = b'<script type="application/json" id="portcheck-data">', b"</script>"
PAGE_BYTES = 64 << 20  # a 7B model's page is a few MB


def data_of(path):
    """The data a page this project wrote embeds (page(data)'s JSON, which no '<' survives in), None where `path`
    holds no such page or its data does not read."""
    try:
        with open_regular(path, follow=False) as f:
            text = f.read(PAGE_BYTES + 1)
        if SIGNATURE.encode() not in text[:256] or len(text) > PAGE_BYTES:
            return None
        start = text.index(DATA_OPEN) + len(DATA_OPEN)
        data = json.loads(text[start:text.index(DATA_CLOSE, start)].decode("ascii"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def messages_link(path) -> str:
    """The messages page as a link from a page written at `path`: relative to this project's docs/ where the
    library runs from its checkout, else the project's own path (docs/messages.md)."""
    docs = Path(__file__).resolve().parents[3] / MESSAGES
    if path is None or not docs.is_file():
        return MESSAGES
    return os.path.relpath(docs, Path(path).resolve().parent)


def writable_page(path) -> Path:
    """`path` checked as a place for a page, before anything is judged or written: no link in it, and no file there
    but one this project wrote."""
    path = Path(path)
    writable(path)
    if os.path.lexists(path) and not ours(path):
        raise PipelineError(f"{path} exists and is not a page portcheck wrote (a file of your own?): choose another "
                            "file [PC191]")
    return path


def write(data: dict, path) -> str:
    """Write the page at `path` (atomically, never through a link, never over a file this project did not write);
    a line saying where."""
    path = writable_page(path)
    text = page(data, messages_link(path))
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return f"page: {path} ({len(text.encode()) // 1024 + 1} KB; opens offline in a browser)"
