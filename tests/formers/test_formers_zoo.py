"""The zoo's PaddleFormers families (tools/zoo/formers.py): docs/zoo.md's table is the one its recorded run writes,
zoo_cn.md gives each family the same verdict, and Llama, run again, is green with each plant red at its module."""
import re

from tools.zoo import formers_page, recorded, tables


def _recorded() -> list:
    results = formers_page.load(recorded.BENCH.parent)
    assert results, f"no recorded run: {recorded.FORMERS_COMMAND}"
    return results


def test_the_zoo_page_holds_the_recorded_runs_table_and_every_verdict_has_a_reading():
    results = _recorded()
    lines = recorded.GUIDE.read_text(encoding="utf-8").split("\n")
    start, end = lines.index(formers_page.TITLE), lines.index(formers_page.FINDINGS[0])
    assert lines[start:end] == formers_page.section(results)
    assert not tables.unread(results), tables.unread(results)
    assert {r["family"] for r in results} == set(__import__("tools.zoo.formers", fromlist=["_"]).FAMILIES)
    for r in results:  # a port's difference links to its finding
        if r.get("reason"):
            assert formers_page.FINDINGS_LINK in formers_page.why(r), r["family"]


def test_the_chinese_page_gives_each_family_its_recorded_verdict():
    text = (recorded.GUIDE.parent / "zoo_cn.md").read_text(encoding="utf-8")
    start = text.index("## 按结论列出的 PaddleFormers 架构")
    end = text.find("\n## ", start + 1)  # the next section (PaddleFormers' generation), or the page's end
    section = text[start:] if end < 0 else text[start:end]
    rows = {line.split("|")[1].strip().strip("`"): line.split("|")[3].strip() for line in section.splitlines()
            if line.startswith("| `")}
    assert rows == {r["family"]: tables.kind(r["outcome"]) for r in _recorded()}
    assert re.search(rf"{len(_recorded())} 个架构", section)
    assert f"（{round(sum(r.get('seconds', 0) for r in _recorded()))} 秒" in section


def test_llama_runs_green_with_every_plant_red_at_its_module_as_recorded():
    from tools.zoo import formers
    r = formers.judge_one("llama", fast=True)
    assert r["forward"] and r["outcome"] == "green, every plant red at its module", r
    assert len(r["plants"]) == 3 and all(p["red"] and p["named"] for p in r["plants"]), r["plants"]
    assert next(x for x in _recorded() if x["family"] == "llama")["outcome"] == r["outcome"]
