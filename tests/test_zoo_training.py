"""The zoo's AdamW digits CNN (a conv bias before a BatchNorm, 200 test images): a training whose final count flips by
one image with the order of a sum, judged against torch's own runs under other kernels (tools/zoo/checks/training.py).
Its correct port green with torch's run at one thread and at two; its plants red, the BatchNorm momentum one at the
final metric, beyond torch's own spread."""
import pytest

pytest.importorskip("torch")
pytest.importorskip("paddle")
pytest.importorskip("sklearn")

import torch  # noqa: E402 (after the skips)

from tools.zoo import cases, run  # noqa: E402
from portcheck.pipeline.training import torch_kernels  # noqa: E402
from tools.zoo.checks import training  # noqa: E402

CASE = cases.by_name()["training, conv bias before BatchNorm, AdamW"]


def verdict(plant):
    judgements, error = run.run_one(CASE, plant)
    return run.outcome(CASE, plant, judgements, error)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_correct_port_is_green_at_one_thread_and_at_two(threads):
    """One image (0.005) apart, over the guide's 0.0015: torch's own runs end as far apart under other kernels, and
    the verdict says the guide's bound is one no port can meet there."""
    with torch_kernels(threads, True):
        result = verdict(None)
    assert result["got"] == "ok", run.said(result)
    final = next(j for j in result["judgements"] if j["rule"].startswith("train_align"))
    if "torch's own spread 0 " not in final["detail"]:
        assert "which no port can meet there" in final["detail"], final["detail"]


@pytest.mark.parametrize("plant", CASE["plants"], ids=lambda p: p["name"])
def test_each_plant_is_red_at_its_place(plant):
    """The BatchNorm momentum plant red at train_align itself (its `red`): the widened bound still judges it."""
    result = verdict(plant)
    assert result["got"] == "ok", f"{result['got']}: expected {run.expected(CASE, plant)}; {run.said(result)}"


def test_torch_kernels_are_restored_even_on_an_error():
    """training.torch_kernels, which the zoo's own runs are made under: torch's threads and oneDNN back after."""
    before, onednn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    with pytest.raises(RuntimeError):
        with torch_kernels(before + 1, not onednn):
            assert torch.get_num_threads() == before + 1 and torch.backends.mkldnn.enabled != onednn
            raise RuntimeError
    assert (torch.get_num_threads(), torch.backends.mkldnn.enabled) == (before, onednn)


def test_the_yardsticks_figures_are_the_measurements():
    """The zoo's kernels are the ones tools/step5_own_kernels.py measured (docs/bench/rules.json's "own_kernels"), and
    docs/rules.md (and its Chinese twin) say that run's figures: every moved run at one thread counts torch's images,
    a share of those under the other kernels an image away, as Paddle's run."""
    import json
    from pathlib import Path
    docs = Path(__file__).resolve().parents[1] / "docs"
    own = json.loads((docs / "bench" / "rules.json").read_text())["own_kernels"]
    assert [tuple(k) for k in own["kernels"]] == list(training.KERNELS) and own["threads"] == 1
    count = lambda a: round(a * own["test_images"])
    base, at_own = count(own["torch"]), own["kernels"].index([1, True])
    assert all(count(row[at_own]) == base for row in own["final"])
    others = [count(a) for row in own["final"] for j, a in enumerate(row) if j != at_own]
    away, apart, paddle = sorted({a for a in others if a != base}), len(others) - others.count(base), count(own["paddle"])
    for page, said in (("rules.md", [f"all {len(own['seeds'])} moved runs", f"torch's {base}",
                                     f"{apart} of {len(others)}", " or ".join(map(str, away)), f"Paddle's {paddle}"]),
                       ("rules_cn.md", [f"{len(own['seeds'])} 次移动运行", f"{len(others)} 次中有 {apart} 次",
                                        " 或 ".join(map(str, away)), f"torch 的 {base}", f"Paddle 的 {paddle}"])):
        text = " ".join((docs / page).read_text(encoding="utf-8").split())  # hard-wrapped lines joined
        assert all(s in text for s in said), (page, [s for s in said if s not in text])
