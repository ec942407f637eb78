"""What `python -m portcheck run` and each side's recorder hand each other, named once for both: the run's settings,
in an environment variable (SETTINGS), the files of the side's folder (RECORD, STATUS, INIT, and CROSSED, the values
the taking side takes Paddle's side of 0 at: crossed_file), each written whole or not at all (write_text), and the
exit code of a script the recorder stopped (STOPPED_EXIT). The recorder writes them inside the user's script; run,
launch, folders, full and split_ranks read them.

Imports the standard library and numpy; core and gradients only inside functions (the recorder runs in the script's
interpreter, where numpy may be all that is installed).
"""
import json
from pathlib import Path

import numpy as np

SETTINGS = "PORTCHECK_RUN"   # the environment variable holding the run's settings (json)
RECORD = "record.npy"        # each side's record, in its folder
STATUS = "status.json"       # each side's outcome: steps taken, config, the error that stopped it
INIT = "init.npy"            # the torch side's initial weights, in torch's layout (the float64 run starts there)
CROSSED = "crossed.json"     # the taking side's folder: the values it takes Paddle's side of 0 at (crossed_file)
STOPPED_EXIT = 3             # the exit code of a script the recorder stopped with an error


def write_text(path: Path, text: str):
    from portcheck.core.fileio import atomic_write  # never through a link; a kill leaves no half-written file
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def crossed_file(path: Path, crossed=None) -> list:
    """The taking side's [backward.Crossing], written by run (crossed given) or read by the recorder: json,
    nothing in it run."""
    from portcheck.gradients.kinks import Crossing
    if crossed is not None:
        write_text(path, json.dumps([{"step": c.step, "module": c.module, "index": c.index.tolist(),
                                     "torch": c.torch.tolist(), "paddle": c.paddle.tolist()} for c in crossed]))
        return crossed
    return [Crossing(int(c["step"]), str(c["module"]), np.asarray(c["index"], np.int64),
                     np.asarray(c["torch"], np.float64), np.asarray(c["paddle"], np.float64))
            for c in json.loads(path.read_text())]
