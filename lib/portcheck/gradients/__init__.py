"""Gradients and optimizer steps compared: backward (judge and compare_backward, K steps), recording (one side's
run recorded: record_backward), result (its report), against_itself (torch's runs against itself), kinks (ReLU
kinks crossed), optimizers (optimizer pairs that differ by design), restarts (each isolated step's start from
torch's weights), few_values (a BatchNorm over few values per channel), digests (each step's update digests),
weight_stats (per-parameter norms side by side), split_steps (a Paddle model in tensor parallel trained against
torch's: compare_split_backward).

May import portcheck.core, portcheck.mapping, portcheck.forward and portcheck.parallel."""
