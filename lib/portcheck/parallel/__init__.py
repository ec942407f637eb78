"""Tensor parallel: a Paddle model split across ranks (processes of one machine, or GPUs) compared with the torch
model in this process. split (compare_split: each rank's outputs gathered as its layer lays them out and judged by
forward's judge_forward, each rank's own part named where it differs), split_rank (what each rank runs: fleet set up,
its shard loaded and checked, every module recorded with its layout, a forced run on torch's values), standins
(Paddle's model-parallel ops with no CPU kernel, stood in for by gloo collectives on a CPU).

May import portcheck.core, portcheck.mapping and portcheck.forward; Paddle only inside its functions."""
