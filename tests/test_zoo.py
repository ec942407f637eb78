"""The zoo's fast part (tools/zoo/cases.py, the cases marked fast: schedulers, optimizers, losses, metrics and
loaders): every correct port and every plant judged through portcheck's public API, its verdict asserted to be
the table's (a correct port green at each of its rules; a plant red at its step, named at its place).

A verdict the library gets wrong today is declared in the table (`known`, with its issue) and runs here as a
strict xfail: the day it is fixed the test fails, and the table's line must go. The whole zoo, models and
training included: `python -m tools.zoo.run` (docs/zoo.md)."""
import pytest

pytest.importorskip("torch")
pytest.importorskip("paddle")
pytest.importorskip("sklearn")

from tools.zoo import cases, run  # noqa: E402 (after the skips)

RUNS = [pytest.param(case, plant, id=f"{case['name']}: {plant['name'] if plant else 'correct port'}",
                     marks=[pytest.mark.xfail(strict=True, reason=f"issue {known['issue']}: {known['why']}")]
                     if (known := (plant or case).get("known")) else [])
        for case in cases.CASES if case.get("fast") and not case.get("skip") for plant in run.runs(case)]


@pytest.mark.parametrize("case, plant", RUNS)
def test_the_librarys_verdict_is_the_tables(case, plant):
    judgements, error = run.run_one(case, plant)
    result = run.outcome(case, plant, judgements, error)
    assert result["got"] == "ok", f"{result['got']}: expected {run.expected(case, plant)}; {run.said(result)}"


def test_the_table_is_well_formed():
    """Names unique, every plant at a step its case covers, with a place and a cause; known marks name an issue."""
    table = cases.by_name()
    assert len(table) == len(cases.CASES)
    for case in cases.CASES:
        for plant in case["plants"]:
            assert set(run.steps_of(plant)) <= set(case["steps"]), (case["name"], plant["name"])
            assert "where" in plant and plant["cause"], (case["name"], plant["name"])
        for known in [case.get("known")] + [p.get("known") for p in case["plants"]]:
            assert known is None or (isinstance(known["issue"], int) and known["why"]), case["name"]


def test_a_refused_plant_is_ok_only_when_refused_saying_its_text_at_its_place():
    """A plant the library must refuse before judging (`refused`): its one line must say the text and the place;
    another error, or judgements with no refusal, is a mismatch."""
    from tools.zoo.checks import Judgement
    plant = {"name": "a config difference", "step": 1, "where": "token_type", "refused": "configs differ",
             "cause": "another type_vocab_size"}
    case = {"name": "a pair", "group": "model", "steps": (1,), "plants": [plant]}
    got = lambda error, judgements=(): run.outcome(case, plant, list(judgements), error)["got"]
    assert got("portcheck: torch token_type against Paddle token_type: the two models' configs differ there") == "ok"
    assert got("portcheck: torch word against Paddle word: the two models' configs differ there") == "error"
    assert got("portcheck: 1 torch module(s) have no counterpart: token_type") == "error"
    assert got("", [Judgement("forward, every module (K=16)", 1, False, 2.0, "token_type")]) == "not refused"
