"""The framework-free checking library: it imports numpy and common/, never torch or paddle.

    diff.py            two dicts of arrays in, a CheckResult (per-key KeyResult, findings, notes) out
    report.py          a CheckResult as reprod_log's log, a JSON verdict beside it, and hand-in copies
    tolerances.py      every threshold the checks apply, with the measurement behind it
    diagnose.py        module-by-module and parameter-by-parameter tables: where two runs part
    weight_stats.py    per-parameter mean/std/norm of two trained models: a wrong weight-decay group
    shared_dropout.py  the numpy mask stream both twins draw identical dropout masks from (Step 5)
"""
