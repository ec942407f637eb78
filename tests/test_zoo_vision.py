"""The vision zoo (tools/zoo/vision.py: timm against PaddleClas; docs/zoo.md, The vision pairs by verdict): every
pair has its row, the user's pages say the recorded run's verdicts, a run without the optional extra ends in one
line; where timm and paddleclas are installed (requirements-vision.txt; CI installs them), one pair judged again
gives its recorded row."""
import json

import pytest

from tools.zoo import recorded, vision, vision_page

RUN = json.loads((recorded.BENCH.parent / recorded.VISION_JSON).read_text(encoding="utf-8"))
ROWS = {r["pair"]: r for r in RUN["results"]}


def test_every_pair_has_its_row_and_every_verdict_is_read():
    assert list(ROWS) == list(vision.PAIRS)
    assert {r["outcome"] for r in ROWS.values()} <= set(vision_page.READING)
    assert all(r["outcome"] != "not the same model" or r["pair"] in vision.REASONS for r in ROWS.values())


def test_each_difference_the_zoo_undoes_is_the_only_one():
    """A pair not the same model by a setting alone is judged again with the setting undone on the Paddle side:
    green there, its plant red at its module (an undone pair still red would be a second difference, or a false red)."""
    assert set(vision.UNDONE) <= set(vision.REASONS) and set(vision.FALSE_VERDICTS) <= set(vision.UNDONE)
    for name in vision.UNDONE:
        row = ROWS[name]
        assert row["outcome"] == "not the same model" and row["undone"]["what"] == vision.UNDONE[name][0], row
        assert name in vision.FALSE_VERDICTS or row["undone"]["outcome"] == "green, the plant red at its module", row


def test_a_false_verdict_said_is_one_the_recorded_run_still_makes():
    """FALSE_VERDICTS names the undone pairs portcheck still finds red or refuses: each one's recorded row is not
    green (a pair gone green is taken off the list, and off the page's list with it)."""
    for name in vision.FALSE_VERDICTS:
        assert ROWS[name]["undone"]["outcome"] != "green, the plant red at its module", name
        assert ROWS[name]["undone"]["false_verdict"] == vision.FALSE_VERDICTS[name], name


def test_the_users_page_holds_the_recorded_runs_table():
    text = recorded.GUIDE.read_text(encoding="utf-8")
    assert "\n".join(vision_page.section(RUN)) in text


def test_the_chinese_page_holds_each_pairs_verdict():
    text = (recorded.GUIDE.parent / "zoo_cn.md").read_text(encoding="utf-8")
    section = text.split("\n## 按结论列出的视觉模型对\n")[1].split("\n## ")[0]
    rows = {line.split("|")[1].strip(): line.split("|")[4].strip() for line in section.splitlines()
            if line.startswith("| `")}
    assert rows == {f"`{name}`": r["outcome"] for name, r in ROWS.items()}
    assert f"{RUN['seconds']} 秒" in section


def test_a_run_without_the_extra_and_an_unknown_pair_end_in_one_line(monkeypatch):
    from portcheck.core.errors import PipelineError
    monkeypatch.setattr(vision, "installed", lambda: f"pip install --no-deps -r {vision.REQUIREMENTS}")
    for argv, says in (([], "timm or paddleclas is not installed (the vision zoo's optional extra): pip install "
                            f"--no-deps -r {vision.REQUIREMENTS}"),
                       (["--only", "alexnet"], "--only alexnet: not a pair of this zoo; its pairs: "
                                               + " ".join(vision.PAIRS))):
        monkeypatch.setattr("sys.argv", ["tools/zoo/vision.py", *argv])
        with pytest.raises(PipelineError) as raised:
            vision.main()
        assert str(raised.value) == says


def test_a_pair_judged_again_gives_its_recorded_row():
    if vision.installed():
        pytest.skip(f"timm or paddleclas is not installed here ({vision.installed()}; CI installs them)")
    name = "pvt_v2_b0"
    got, row = vision.judge_one(name, fast=True), ROWS[name]
    assert (got["outcome"], got.get("plant")) == (row["outcome"], row.get("plant")), got
