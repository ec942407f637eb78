"""Every file the pipeline reads or writes, resolved from the repository root.

Generated files (weights, fake data, step outputs, log_reprod) live under WORK,
which is the repository root unless BERT_ALIGN_HOME points elsewhere. Tests set
it to a temporary folder so they never touch a user's results.
"""
import os
import sys
from pathlib import Path

from portcheck.core import fileio

ROOT = Path(__file__).resolve().parents[1]
SST2_DIR = ROOT.parent / "shared" / "data" / "SST-2"  # the real GLUE data on this workplace (tests, benchmarks)
DEMO_TSV = ROOT / "pipeline" / "Step2" / "demo_sst2_sentence" / "demo.tsv"  # 40 sentences, committed


def work() -> Path:
    return Path(os.environ.get("BERT_ALIGN_HOME", ROOT)).resolve()


def weights_dir() -> Path:
    return work() / "weights"


def torch_weight() -> Path:
    return weights_dir() / "torch_weight.bin"


def paddle_weight() -> Path:
    return weights_dir() / "paddle_weight.pdparams"


def model_config() -> Path:
    return weights_dir() / "config.json"


def vocab() -> Path:
    return weights_dir() / "vocab.txt"


def classifier_dir() -> Path:
    return work() / "classifier_weights"


def classifier_torch() -> Path:
    return classifier_dir() / "classifier_weights.bin"


def classifier_paddle() -> Path:
    return classifier_dir() / "classifier_weights.pdparams"


def fake_data_dir() -> Path:
    return work() / "fake_data"


def fake_data() -> Path:
    return fake_data_dir() / "fake_data.npy"


def fake_label() -> Path:
    return fake_data_dir() / "fake_label.npy"


def step_dir(n: int) -> Path:
    """Where step n's scripts write their .npy pair and diff log."""
    return work() / "pipeline" / f"Step{n}"


# Inside each Step 5 checkpoint-<step>/ folder, beside run_state.json: model, optimizer and scheduler state
STEP5_STATE = {"torch": "torch_state.pt", "paddle": "paddle_state.pdparams"}


def step5_state(checkpoint, framework: str) -> Path:
    return Path(checkpoint) / STEP5_STATE[framework]


def rerun() -> str:
    """The command that runs this process's script again: the remedy for an output it writes or reads back."""
    return f"python {shown(sys.argv[0])}"


# run_all.py sets it to 1 for its steps when it trains on real data (--data_dir): only such a run writes the
# repository's committed log_reprod/
REAL_DATA = "BERT_ALIGN_REAL_DATA"


def log_reprod() -> Path:
    """The hand-in folder: BERT_ALIGN_HOME's log_reprod/; in the repository itself, the committed log_reprod/
    only for a run on real data, and log_reprod_demo/ for any other (a demo never overwrites the reference)."""
    if work() == ROOT and os.environ.get(REAL_DATA) != "1":
        return ROOT / "log_reprod_demo"
    return work() / "log_reprod"


def shown(path) -> str:
    """A path as committed files and logs show it: relative to the repository (or BERT_ALIGN_HOME)."""
    return fileio.shown(path, work(), ROOT)
