"""PaddleFormers' generation column (tools/zoo/formers_generating.py, run in the PaddleFormers venv;
docs/bench/zoo_formers_generation.json): a row per family of the PaddleFormers zoo, each verdict one the page says
how to read, each on both pages with the run's time; a green row's cache plant red at its step and layer; a family
that is not built says why in one line. Its pairs are judged again in tests/formers/test_formers_generation.py."""
import json
import re

from tools.zoo import formers, formers_generating_page, generating_page, recorded


def held() -> dict:
    return json.loads((recorded.BENCH.parent / recorded.FORMERS_GENERATION_JSON).read_text(encoding="utf-8"))


def test_every_paddleformers_family_has_a_row_read_on_both_pages():
    rows = held()["results"]
    assert sorted(r["family"] for r in rows) == sorted(formers.FAMILIES)
    assert {r["outcome"] for r in rows} <= set(generating_page.READING)
    guide = recorded.GUIDE.read_text(encoding="utf-8")
    assert formers_generating_page.TITLE in guide and all(f"| {r['family']} |" in guide for r in rows)
    chinese = (recorded.GUIDE.parent / "zoo_cn.md").read_text(encoding="utf-8")
    said = dict(re.findall(r"^\| `(\w+)` \| [^|]*\| ([^|]+?) \|$", chinese, re.M))
    assert {r["family"]: r["outcome"] for r in rows} == said
    seconds = round(sum(r.get("seconds", 0) for r in rows))
    assert f"({seconds} s," in guide and f"{seconds} 秒" in chinese


def test_green_rows_caught_their_plant_and_the_rest_say_why():
    rows = held()["results"]
    green = [r for r in rows if r["outcome"].startswith("green")]
    assert green and all(r["outcome"] == "green, the cache plant red at its step and layer" for r in green)
    assert all(r.get("said") or r.get("reason") or r.get("figure") for r in rows if r not in green)
