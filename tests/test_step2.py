"""Step 2 passes on the aligned pipelines and goes red on each planted data or metric bug."""

import pytest

from bert_sst2 import data
from portcheck.core.errors import PipelineError
from portcheck.core.fileio import load_npy
from conftest import SST2, error_line, private_copy, run, step_sides

S = "pipeline/Step2/"
SCRIPTS = [S + "pt_data_loader.py", S + "pd_data_loader.py", S + "pt_metric.py", S + "pd_metric.py"]
CHECK = S + "check_step2.py"


@pytest.fixture(scope="module")
def aligned(run_all_home, tmp_path_factory):
    """The tiny home with all four Step 2 outputs, aligned, as run_all.py's run of SCRIPTS wrote them (read-only:
    tests copy it)."""
    return step_sides(run_all_home, tmp_path_factory.mktemp("step2") / "home", 2, ("data", "metric"))


@pytest.fixture
def copy(aligned, tmp_path):
    return private_copy(aligned, tmp_path)


def logs(home):
    return {name: (home / f"pipeline/Step2/{name}_diff.log").read_text() for name in ("data", "metric")}


def test_aligned_passes_and_fills_log_reprod(copy):
    run(CHECK, home=copy, check=0)
    assert all("diff check passed" in log for log in logs(copy).values())
    for name in ("data", "metric"):
        for suffix in ("_torch.npy", "_paddle.npy", "_diff.log"):
            assert (copy / "log_reprod" / f"{name}{suffix}").is_file()
    # the demo set really exercises truncation and a short last batch
    d = load_npy(copy / "pipeline/Step2/data_torch.npy")
    assert int(d["length"]) == 40
    assert max(len(d[f"example_{i:05d}_input_ids"]) for i in range(40)) == 128
    assert d["batch_000_input_ids"].shape == (32, 128) and d["batch_001_labels"].shape == (8,)


@pytest.mark.parametrize("bug, script, failing, keys", [
    ("paddle_cased_tokenizer", 1, "data", ["example_00005_input_ids", "batch_000_input_ids"]),  # "TENDER", "Montréal"
    ("paddle_max_length_256", 1, "data", ["example_00032_input_ids", "batch_000_input_ids"]),
    ("paddle_drop_last", 1, "data", ["batch_001_labels"]),
    ("torch_shuffle", 0, "data", ["batch_000_labels"]),
    ("paddle_no_attention_mask", 1, "data", ["batch_000_attention_mask"]),
    ("paddle_no_attention_mask", 3, "metric", ["model_logits"]),
    ("torch_argmax_wrong_axis", 2, "metric", ["random_accuracy", "model_accuracy"]),
])
def test_planted_bug_turns_the_check_red(copy, bug, script, failing, keys):
    run(SCRIPTS[script], home=copy, plant=bug, check=0)
    proc = run(CHECK, home=copy, check=1)
    failed = next(line for line in logs(copy)[failing].splitlines() if "diff check failed" in line)
    assert all(key in failed.split(": ", 2)[-1].split(", ") for key in keys), failed
    other = {"data": "metric", "metric": "data"}[failing]
    assert "diff check passed" in logs(copy)[other]  # each bug shows where it is, not everywhere
    assert "diff check failed" in proc.stdout


@pytest.mark.parametrize("body, problem", [
    ("sentence\tlabel\ngood\t1\nbad\t2\n", ":3: label must be 0 or 1"),
    ("sentence\tlabel\ngood\t1\nno label here\n", ":3: expected 2 tab-separated columns, got 1"),
    ("sentence\tlabel\ntab\tin\t1\n", ":2: expected 2 tab-separated columns, got 3"),
    ("good\t1\n", ":1: header must be"),
    ("index\tsentence\n0\tan unlabelled test row\n", ":1: header must be"),
])
def test_malformed_tsv_names_file_and_line(tmp_path, body, problem):
    path = tmp_path / "dev.tsv"
    path.write_text(body)
    with pytest.raises(PipelineError, match=problem) as e:
        data.read_tsv(path)
    assert str(path) in str(e.value)


def test_quotes_are_kept_verbatim(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text('sentence\tlabel\n"quoted" start\t1\nan "odd quote\t0\n')
    assert [ex["sentence"] for ex in data.read_tsv(path)] == ['"quoted" start', 'an "odd quote']


@pytest.mark.parametrize("script", [0, 1])
def test_bad_row_is_one_error_line_and_keeps_results(copy, tmp_path, script):
    out = copy / "pipeline/Step2" / ("data_torch.npy", "data_paddle.npy")[script]
    before = out.read_bytes()
    (tmp_path / "dev.tsv").write_text("sentence\tlabel\nfine\t0\nbroken\tpositive\n")
    proc = run(SCRIPTS[script], "--data_dir", tmp_path, home=copy, check=2)
    assert f"{tmp_path / 'dev.tsv'}:3: label must be 0 or 1" in error_line(proc)
    assert "Traceback" not in proc.stderr
    assert out.read_bytes() == before


def test_data_dir_without_the_split_says_what_to_pass(tmp_path):
    with pytest.raises(PipelineError, match="dev.tsv not found: --data_dir must be a GLUE SST-2 folder"):
        data.split_file("dev", tmp_path)


def test_offline_hub_ends_in_one_clear_error(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from bert_sst2.twins import pd_data, pt_data
    for fw in (pt_data, pd_data):
        with pytest.raises(PipelineError, match="pass --data_dir"):
            fw.load_split("train")
    # hub on but unreachable: the loader's own exception becomes the same one line
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    with pytest.raises(PipelineError, match=r"\(ConnectionError: no network\); pass --data_dir"):
        data.from_hub(lambda: (_ for _ in ()).throw(ConnectionError("no network")), "glue/sst2")


def test_check_before_scripts_says_what_to_run(home):
    proc = run(CHECK, home=home, check=2)
    assert "pt_data_loader.py" in error_line(proc)


def test_scripts_run_from_any_directory(copy, tmp_path):
    run(SCRIPTS[0], home=copy, cwd="/", check=0)  # every other run here is from /tmp
    run(CHECK, home=copy, cwd=tmp_path, check=0)


@pytest.mark.skipif(not (SST2 / "dev.tsv").is_file(), reason="no SST-2 on this machine")
def test_sst2_dev_aligned(copy):
    for script in SCRIPTS[:2]:
        run(script, "--data_dir", SST2, home=copy, check=0)
    run(CHECK, home=copy, check=0)
    d = load_npy(copy / "pipeline/Step2/data_paddle.npy")
    assert int(d["length"]) == 872 and "batch_027_labels" in d and d["batch_027_labels"].shape == (8,)
    assert sum(int(d[f"example_{i:05d}_label"]) for i in range(872)) == 444  # SST-2's README
