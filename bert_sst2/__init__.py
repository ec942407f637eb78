"""The framework-free foundation every layer above builds on; importing it changes nothing.

    errors.py    PipelineError (a problem the user can fix), require(), run_main(): one error line, exit 2
    paths.py     every file the pipeline reads or writes, under BERT_ALIGN_HOME or the repository
    hparams.py   hyperparameters and data facts both frameworks share (seed, max length, casing, lr...)
    fileio.py    atomic writes and the ReprodLogger .npy reader/writer that never runs code
    data.py      the SST-2 TSV reader and the seeded example orders both frameworks train in
    inputs.py    the fixed fake and padded batches Steps 1, 3 and 4 feed both models
    runtime.py   offline mode, threads, allocator: `import common.runtime` first in every entry script

Layers, lowest first: models/ (the twin BERTs and their config) imports nothing of the project;
common/ imports nothing above it; checks/ (the framework-free checking library) imports common/;
twins/ (per-framework data, optimizers, weights, training backends) imports the three below;
pipeline/, weights/, classifier_weights/, fake_data/ and tools/ are scripts on top.
"""
