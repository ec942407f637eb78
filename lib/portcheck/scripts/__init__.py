"""Scripts mode, `python -m portcheck run`: run (the command), judge_run (a run's records judged as one run and handed
in), fed (what each side fed its model, as the data pair compares it), launch (each side's script started, launchers),
folders (the run's folder and its seals), full (run --full), replay (each optimizer replayed in float64 on the run's own gradients: its own float32 error), runconfig (the two configurations compared), recorder
(one side's recording, injected into a user's unedited training script), install (the recorder installed in the
script's process: which process records, where, with which hooks), side_files (what run and the recorder hand each
other: the settings, a side's files), first_call (the model's first call and first step), arguments (a call's tensors
as arrays), wrapping (what both frameworks' hooks wrap alike: losses, dropout, samplers), hooks_torch
and hooks_paddle (one module per framework's hooks), paddle_start (the Paddle side's start from torch's weights), split_ranks (a Paddle script launched split in tensor parallel:
each rank's part, the ranks joined into one side), progress (each launched rank's progress marker, read at a
timeout to name the rank that hung); inject/ (a folder, not a package) holds the sitecustomize put
first on each side's PYTHONPATH.

May import every other subpackage; only portcheck.cli imports it."""
