"""docs/zoo.md's last section: PaddleFormers' generation column (the run `python -m tools.zoo.formers_generating`
records in the PaddleFormers environment, JSON beside the benchmark page), read as the paddlenlp column is
(generating_page's verdicts), with each library's own generate beside. tools/zoo/page.py writes it last; write_table
writes it again alone, where the paddlenlp zoo's runs cannot be read. zoo_cn.md says the same."""
import json
from collections import Counter
from pathlib import Path

from tools import bench_doc
from tools.zoo import recorded, tables
from tools.zoo.generating import STEPS
from tools.zoo.generating_page import READING, why

TITLE = "## PaddleFormers generation, by each library's own loop"


def load(folder: Path) -> list:
    """The recorded run's rows (none yet: [])."""
    held = Path(folder) / recorded.FORMERS_GENERATION_JSON
    return json.loads(held.read_text(encoding="utf-8"))["results"] if held.exists() else []


def section(results: list) -> list:
    """The column's section: its rows in generating_page.READING's order, then by family."""
    if not results:
        return []
    order = list(READING)
    place = lambda k: order.index(k) if k in order else len(order)
    rows = [[r["family"], r.get("classes") or "", r["outcome"],
             "; ".join(filter(None, [r.get("reason", ""), why(r)])), r.get("generate", "")]
            for r in sorted(results, key=lambda r: (place(r["outcome"]), r["family"]))]
    kinds = Counter(r["outcome"] for r in results)
    seconds = round(sum(r.get("seconds", 0) for r in results))
    return [TITLE, "",
            f"The PaddleFormers families above whose causal LM builds here, run in the PaddleFormers environment by "
            f"`{recorded.FORMERS_GENERATION_COMMAND}` ({seconds} s, each family in a process of its own). Each side "
            "is built from the family's tiny config with its cache on and its head untied (the two libraries' "
            f"defaults differ), converted with no map, and decoded {STEPS} steps as the paddlenlp column is. The last "
            "column is each library's own greedy generate (`step=\"generate\"`), its headline.", "",
            f"{len(results)} families: " + "; ".join(
                f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kn: place(kn[0]))) + ".", "",
            *tables.table(["family", "paddleformers / transformers", "verdict", "why", "each library's generate"],
                          rows), ""]


def write_table(guide: Path = None, folder: Path = None) -> None:
    """The section in docs/zoo.md again, from the recorded run: from its title to the page's end (where it stands)."""
    guide = Path(guide or recorded.GUIDE)
    lines = guide.read_text(encoding="utf-8").rstrip("\n").split("\n")
    lines = lines[:lines.index(TITLE)] if TITLE in lines else [*lines, ""]
    lines += section(load(folder or recorded.BENCH.parent))
    bench_doc.write(guide, "\n".join(lines).rstrip("\n") + "\n")
