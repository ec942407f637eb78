"""The forward pass of one model pair compared: twin (torch's float64 run, the yardstick), judging (one output
against the other), result (ForwardReport), outputs (two runs' outputs paired and judged), leaves (two paired calls'
outputs paired leaf by leaf), chosen (outputs=: which outputs a report judges), compare (record, judge and
compare_forward), isolate (each module on torch's own values), calls (the first call that differs, at its source
line), routing (a mixture of experts' routing compared as data: each token's experts on both sides, a tie said as
one), alike (like calls only the layers reading them tell apart, a RoPE per layer type, paired by running each
order), plot (the per-module figure), graph (the two runs' graphs for Model Explorer). Checkpoint folders read block
by block are portcheck.checkpoints; a model split in tensor parallel, portcheck.parallel.

May import portcheck.core and portcheck.mapping; torch and Paddle only inside the functions handed their models."""
