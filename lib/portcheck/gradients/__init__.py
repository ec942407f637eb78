"""Gradients and optimizer steps compared: backward (record, judge and compare_backward, K steps, against itself,
kinks), weight_stats (per-parameter norms side by side).

May import portcheck.core, portcheck.mapping and portcheck.forward."""
