"""The forward pass compared: twin (torch's float64 run, the yardstick), judging (one output against the other),
result (ForwardReport), outputs (two runs' outputs paired and judged), compare (record, judge and compare_forward),
isolate (each module on torch's own values), calls (the first call that differs, at its source line), stream (a
large model's checkpoints block by block), checkpoint (a checkpoint folder judged before anything is built from it),
plot (the per-module figure), graph (the two runs' graphs for Model Explorer), split (a Paddle model in tensor
parallel against torch's: compare_split), split_rank (what each of its ranks runs), standins (Paddle's model-parallel
ops with no CPU kernel, stood in for on a CPU), routing (a mixture of experts' routing compared as data: each
token's experts on both sides, a tie said as one), split_folders (a split comparison from checkpoint folders:
paddlenlp's own split as each rank's weights, `layers --tp`), formers_folders (`layers` on PaddleFormers folders,
each side loaded by its own library, judged as loaded), fleet (stand-ins for paddlefleet, not on PyPI, so that
paddleformers' base models import).

May import portcheck.core and portcheck.mapping; torch and Paddle only inside the functions handed their models."""
