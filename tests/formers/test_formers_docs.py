"""docs/large_models.md's PaddleFormers program (examples/formers_pair.py) runs in this environment as the page says,
from another folder, and prints what the page's printed block says: the clean Qwen3 pair green with no map, the
planted rms_norm_eps red at the first norm."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from test_docs_blocks import DOCS, printed_as_said, printed_blocks  # noqa: E402


def test_the_pages_program_runs_and_prints_what_the_page_says(tmp_path):
    (_, code, said), = [b for b in printed_blocks(DOCS / "large_models.md") if "examples/formers_pair.py" in b[1]]
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "formers_pair.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert not printed_as_said(proc.stdout, said), (printed_as_said(proc.stdout, said), proc.stdout)
    assert list(tmp_path.iterdir()) == [], "the program wrote into the folder it ran from"
