"""The contest's five steps and their hand-ins: data (Step 2: a loader's batches and a metric), steps (a
pipeline's step table and its runner), handin (pair files written with their run record, and judged as the guide
does), training (Step 5: training logs judged step by step).

May import portcheck.core, portcheck.mapping, portcheck.forward and portcheck.gradients."""
