"""BERT on SST-2, the reference client of portcheck: every BERT fact, declared once, above the library.

    paths.py           every file the pipeline reads or writes, under BERT_ALIGN_HOME or the repository
    hparams.py         hyperparameters and data facts both frameworks share (seed, max length, casing, lr...)
    data.py            the SST-2 TSV reader, the seeded example orders, the rows' fingerprint
    inputs.py          the fixed fake and padded batches Steps 1, 3 and 4 feed both models
    flags.py           the flag rules scripts share; Step 5's flags as one dataclass
    keys.py            the result files' key families
    steps.py           the step table (steps, scripts, pairs), which portcheck.steps runs
    tolerances.py      the tolerances tuned on BERT, with the measurement behind each
    diagnose.py        the watch list and the module / gradient tables
    shared_dropout.py  the numpy mask stream both twins draw identical dropout masks from (Step 5)
    twins/             per-framework code in pairs: data, optimizers, backends, weights, the Step 5 loop

Layers, lowest first: portcheck (the library, numpy only) and models/ (the twin BERTs) import nothing of this
package; bert_sst2 imports both; pipeline/, weights/, classifier_weights/, fake_data/ and tools/ are scripts on top.
"""
