"""Scripts mode, `python -m portcheck run`: run (the command), runconfig (its settings), recorder (injected into a
user's unedited training script), hooks_torch and hooks_paddle (one module per framework's hooks); inject/ (a
folder, not a package) holds the sitecustomize put first on each side's PYTHONPATH.

May import every other subpackage; only portcheck.cli imports it."""
