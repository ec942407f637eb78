"""Torch models of this project's own, each in its upstream's style (pt_*.py), converted by PaConvert 3.3.1
(as_converted/: its output as it wrote it) and fixed by hand where marked `# hand fix` (pd_*.py): docs/paconvert.md,
and the zoo's rows of ports made with PaConvert (tools/zoo/paconvert.py)."""
