"""docs/zoo.md's section on the vision zoo (timm against PaddleClas: tools/zoo/vision.py, the optional extra
requirements-vision.txt): the pairs by verdict, from the run `python -m tools.zoo.vision` records (JSON beside the
benchmark page), and what the zoo finds in PaddleClas's ports. page.py writes it after the PaConvert section;
write_table writes it again alone, where the other runs are not read. zoo_cn.md says the same. A module, not a
command.
"""
import json
from collections import Counter
from pathlib import Path

from tools import bench_doc
from tools.zoo import recorded, tables

TITLE = "## The vision pairs by verdict"
FINDINGS_TITLE = "## What the zoo finds in PaddleClas's ports"
FINDINGS_LINK = "[What the zoo finds in PaddleClas's ports](#what-the-zoo-finds-in-paddleclass-ports)"
# Each verdict a pair's row gives, in the order the table lists them, with how to read it
READING = {
    "green, the plant red at its module": "the port is the same model: forward and each module isolated green, and "
    "the bug planted in it (its first norm's epsilon) red at that norm.",
    "green, the plant red": "the same, but the plant is first red after its norm.",
    "green, the plant green": "the correct port is green, but the planted bug was not caught: a gap of the checks.",
    "green, no part to plant in": "green; the model holds no norm to plant a bug in.",
    "red on the correct port": "red, with no difference of the port named: a false red of the checks, or a "
    "difference not yet found.",
    "not the same model": "PaddleClas's port differs from timm's model, found by copying the pair by hand; the row "
    "names the difference and what the library said ([findings](#what-the-zoo-finds-in-paddleclass-ports)).",
    "refused": "`convert` refused to pair the two models with no map and no layouts; the row gives its line.",
    "raises": "the run raised, for no reason the zoo knows; the row gives the error's line.",
    "not built": "one side cannot be built here; the row says why.",
    "not judged": "the pair ran over its time (`--timeout`).",
}


def load(folder: Path) -> dict:
    """The recorded run (none yet: no rows)."""
    held = Path(folder) / recorded.VISION_JSON
    return json.loads(held.read_text(encoding="utf-8")) if held.exists() else {"seconds": 0, "results": []}


def said(r: dict) -> str:
    """What the library said of a pair: the plant's place, a refusal's line, where the forward was red."""
    if r.get("plant"):
        p = r["plant"]
        return f"plant ({p['plant']}): " + (f"red at {p['at']}" if p["red"] else "green")
    return r.get("said", "")


def why(r: dict) -> str:
    """A row's why: the port's difference first, then what the library said."""
    if r.get("reason"):
        return f"{r['reason']} ({r.get('refused_or_red', '')} with no map: {FINDINGS_LINK})"
    return said(r)


def place(r: dict) -> int:
    return list(READING).index(r["outcome"]) if r["outcome"] in READING else len(READING)


def cpu(results: list) -> int:
    """The CPU seconds of the pairs' processes, summed: what other jobs on the machine do not stretch."""
    return round(sum(r.get("cpu", 0) for r in results))


def section(run: dict) -> list:
    results = run["results"]
    rows = [[r["pair"], r.get("arch", ""), r.get("classes") or "", r["outcome"], why(r)]
            for r in sorted(results, key=lambda r: (place(r), r["pair"]))]
    kinds = Counter(r["outcome"] for r in results)
    return [TITLE, "",
            "timm 1.0.31's models against PaddleClas 2.6.0's ports of them, in the optional extra "
            f"`{recorded.VISION_REQUIREMENTS}` (`pip install --no-deps -r {recorded.VISION_REQUIREMENTS}`: "
            "paddleclas's own pins would move numpy). "
            f"`{recorded.VISION_COMMAND}` judges them ({cpu(results)} s of CPU, {run['seconds']} s on the wall, one "
            "pair after another, each in a process of its own at one thread). Each pair is:", "",
            "- built from one architecture on both sides, 10 classes, at a 64 x 64 image where it takes one. LeViT's, "
            "MixNet's, VGG's and Twins-SVT's are 224 (PaddleClas pools or flattens a 7 x 7 map, or cuts it into 7 x 7 "
            "windows), Swin V2's 256, Inception's 128; "
            "Swin's windows are 2 wide. Its random weights are made "
            "informative: a tensor set to one constant (a norm's ones, a bias's zeros) is drawn at random;",
            "- built by timm at 50's depths (3, 4, 6, 3 blocks; the ResNeXt 4 wide per group) where it names no "
            "50-deep model: seresnet152d and seresnext101d_32x8d against SE_ResNet50_vd and SE_ResNeXt50_vd_32x4d;",
            "- built narrow where PaddleClas's foundation ViT (one class, its model_name choosing CLIP's, BEiT v2's, "
            "MAE's or EVA's parts) stands for the model, CLIP ViT-B/16 aside: 64 wide, 2 deep, EVA's image 56;",
            "- converted with no map and no layouts;",
            "- judged by compare_forward cumulative and isolated, then with a bug planted on the Paddle side (its "
            "first norm's epsilon), expected red at that norm.", "",
            *[f"- **{k}**: {v}" for k, v in READING.items()], "",
            f"{len(results)} pairs: " + "; ".join(f"{n} {k}" for k, n in sorted(
                kinds.items(), key=lambda kn: list(READING).index(kn[0]) if kn[0] in READING else 99)) + ".", "",
            *tables.table(["pair", "architecture", "PaddleClas / timm", "verdict", "why"], rows), "",
            *findings(results)]


def findings(results: list) -> list:
    """Each pair that is not the same model: where PaddleClas's port differs, and what the library said there (the
    module it was red at and by how much, or the line it refused with)."""
    found = [r for r in results if r["outcome"] == "not the same model"]
    return [FINDINGS_TITLE, "",
            "Differences between a PaddleClas 2.6.0 port and timm 1.0.31's model, each found by copying the pair by "
            "hand (results about the ports, not the checks' false reds), and what portcheck says of the pair with no "
            "map. Where the difference is a setting, the zoo gives the Paddle model timm's and judges the pair again: "
            "green there, its plant red, says the difference is the only one.", "",
            *[f"- **{r['arch']}, `{r['pair']}`**: {r['reason']}. With no map, {r.get('refused_or_red', '')}: "
              f"`{r.get('said', '').removeprefix('portcheck: ').replace('`', chr(39))}`" + undone(r) for r in found],
            "", *false_verdicts(found)]


def false_verdicts(found: list) -> list:
    """The pairs still red or refused once undone though one model (copied by hand): portcheck's own false verdicts,
    each a strict xfail in tests/test_zoo_vision.py until it is green."""
    false = [r for r in found if r.get("undone", {}).get("false_verdict")]
    return ["Where portcheck is wrong, the pair being one model once undone:", "",
            *[f"- **{r['arch']}, `{r['pair']}`**: {r['undone']['false_verdict']}" for r in false], ""] if false else []


def undone(r: dict) -> str:
    """The pair judged again with its difference undone on the Paddle side, where the zoo undoes it: green there says
    the difference named is the only one."""
    u = r.get("undone")
    if not u:
        return ""
    p = u.get("plant")
    return (f". Undone on the Paddle side ({u['what']}): {u['outcome']}"
            + (f" (plant: red at {p['at']})" if p and p["red"] else f" (`{u['said']}`)" if u.get("said") else "")
            + (": a false verdict of portcheck's, below" if u.get("false_verdict") else ""))


def write_table(guide: Path = None, folder: Path = None) -> None:
    """The section in docs/zoo.md again, from the recorded run, where it stands (before the PaddleFormers
    families): what tools/zoo/page.py writes there."""
    from tools.zoo import formers_page
    guide = Path(guide or recorded.GUIDE)
    lines = guide.read_text(encoding="utf-8").split("\n")
    end = lines.index(formers_page.TITLE)
    start = lines.index(TITLE) if TITLE in lines else end
    lines[start:end] = section(load(folder or recorded.BENCH.parent))
    bench_doc.write(guide, "\n".join(lines))
