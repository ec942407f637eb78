"""pipeline/run_all.py: one command fills log_reprod/ with every pair, log and SUMMARY.md, and goes red."""
import shutil

from conftest import ROOT, run

STEPS = ["setup", "Step1 forward", "Step2 data + metric", "Step3 loss", "Step4 lr + backward", "Step5 training"]


def test_green_run_fills_log_reprod(run_all_home):
    home, proc = run_all_home
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = home / "log_reprod"
    for stem in ("forward", "data", "metric", "loss", "lr", "bp_align", "train_align"):
        for name in (f"{stem}_torch.npy", f"{stem}_paddle.npy", f"{stem}_diff.log"):
            assert (out / name).is_file(), name
    summary = (out / "SUMMARY.md").read_text()
    for step in STEPS[1:]:
        assert f"| {step}" in summary and "FAILED" not in summary
    assert "paddlepaddle 3.3.1" in summary and "torch 2.13.0" in summary and "random init" in summary


def test_planted_red_step_stops_the_run(run_all_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(run_all_home[0], home)
    kept = (home / "log_reprod/forward_torch.npy").read_bytes()
    # sitecustomize plants the bug in the Paddle forward script only, inside run_all's own subprocess
    (tmp_path / "site").mkdir()
    (tmp_path / "site/sitecustomize.py").write_text(
        "import sys\n"
        "if sys.argv and sys.argv[0].endswith('pd_forward_bert.py'):\n"
        "    import plant; plant.load_all(); plant.PLANTS['paddle_ln_eps']()\n")
    proc = run("pipeline/run_all.py", "--random_init", ROOT / "tests/tiny_config.json",
               home=home, env={"PYTHONPATH": f"{tmp_path / 'site'}:{ROOT / 'tests'}"})
    assert proc.returncode == 1
    summary = (home / "log_reprod/SUMMARY.md").read_text()
    assert "| Step1 forward | FAILED" in summary and "| Step2 data + metric | not run" in summary
    assert "diff check failed" in summary
    assert "FAILED: Step1 forward" in proc.stdout
    assert (home / "log_reprod/forward_torch.npy").read_bytes() == kept  # torch side reran identically
    assert (home / "log_reprod/train_align_paddle.npy").is_file()  # later steps' earlier results stay
