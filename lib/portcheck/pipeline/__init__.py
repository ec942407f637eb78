"""The contest's five steps and their hand-ins: data (Step 2: a loader's batches and a metric), steps (a
pipeline's step table and its runner), handin (pair files written with their run record, and judged as the guide
does; guide: reprod_log's own rule and its diff log; kink_files: torch's runs across a kink beside a pair),
training (Step 5: training logs judged step by step; training_log: each side's log, written and read back;
training_report: the judge's report and verdict as data; own_runs: torch's own runs as the yardstick), folder
(Handin: one hand-in folder, one call per step), bound_page (the page a hand-in holds, bound to its manifest and
verdict), whole (each side's whole record behind Step 4's pair, handed in and judged by the reviewer's check).

May import portcheck.core, portcheck.mapping, portcheck.forward and portcheck.gradients."""
