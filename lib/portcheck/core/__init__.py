"""The framework-free floor: errors, safe reads and writes (fileio), run records and fingerprints (record,
same_run), record keys (keys), the rules (tolerances), exact and atol+rtol judging (diff), the rule measured on the
model (calibrated), logs (report), records on disk (spill), process settings for entry scripts (runtime), the
frameworks' import-time notices silenced (notices), a report as one self-contained HTML page (page), the values no real token reads, at a batch's left padding (unread).

Imports numpy and the standard library only (pandas inside report.frame, when asked), and no other portcheck
subpackage: held by tests/test_layering.py."""
