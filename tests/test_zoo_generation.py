"""The zoo's generation column (tools/zoo/generating.py, docs/bench/zoo_generation.json): every verdict it records is
one the user's page says how to read, the Chinese page holds each family's verdict, and one family judged again here
(OPT: its forward takes no position_ids) gives the row the run recorded."""
import json
import re

import pytest

from tools.zoo import generating, generating_page, recorded


def held_rows() -> list:
    return json.loads((recorded.BENCH.parent / recorded.GENERATION_JSON).read_text(encoding="utf-8"))["results"]


def test_every_family_with_a_generation_head_has_a_row_each_verdict_read_on_the_page():
    rows = held_rows()
    assert [r["family"] for r in rows] == list(generating.LM)
    assert {r["outcome"] for r in rows} <= set(generating_page.READING)
    guide = recorded.GUIDE.read_text(encoding="utf-8")
    assert generating_page.TITLE in guide and all(f"| {r['family']} |" in guide for r in rows)
    green = [r for r in rows if r["outcome"].startswith("green")]
    assert green and all(r["outcome"] == "green, the cache plant red at its step and layer" for r in green)


def test_the_chinese_page_holds_each_familys_generation_verdict():
    text = (recorded.GUIDE.parent / "zoo_cn.md").read_text(encoding="utf-8")
    said = dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|$", text, re.M))
    assert {r["family"]: r["outcome"] for r in held_rows()} == said
    seconds = round(sum(r.get("seconds", 0) for r in held_rows()))
    assert f"{seconds} 秒" in text


def test_a_family_judged_again_gives_its_recorded_row():
    pytest.importorskip("paddle")
    again = generating.judge_one("opt")
    row = next(r for r in held_rows() if r["family"] == "opt")
    assert (again["outcome"], again.get("plant")) == (row["outcome"], row["plant"])


def test_a_red_rows_figure_says_which_rows_part():
    """GPT (paddlenlp's own loop hands its model no padding mask): the row's figure gives each batch row's largest
    logits difference at the parting step, the left-padded row beyond the allowance, the other within it."""
    pytest.importorskip("paddle")
    row = generating.judge_one("gpt")
    assert row["outcome"] == "red on the correct pair", row
    said = r"step 1's logits, max diff row 0 \(left-padded\) (\S+), row 1 (\S+) \(allowed (\S+)\)"
    padded, other, allowed = (float(x) for x in re.fullmatch(said, row["figure"]).groups())
    assert other <= allowed < padded, row["figure"]
    held = next(r for r in held_rows() if r["family"] == "gpt")
    assert held["figure"].startswith("step 1's logits, max diff row 0 (left-padded) ")
