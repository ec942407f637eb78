"""Every tolerance the checks apply, in one place, with the measurement behind it.

Each figure is the largest max abs diff a key may show. The step READMEs have the measured
runs (clean code against the subtlest planted bug) these were set from.
"""
# Step 1: the logits of the same model on the same batch. Clean MiniLM: 3.3e-8; the smallest planted
# bug (Paddle's LayerNorm epsilon 1e-5) moves them by 6.2e-6.
LOGITS = 1e-6
# Step 1: any watched module's output. Aligned MiniLM stays under 1e-5; a wrong epsilon in one
# LayerNorm of layer 3 shows at 5.7e-4 at that module while moving the logits by only 2.7e-7.
MODULE_OUTPUTS = 5e-5
# Step 2: ids, batches and accuracies are integers or exact ratios: nothing may differ.
EXACT = 0.0
# Step 3: the mean cross-entropy of the fake batch (clean: 0 on MiniLM).
LOSS = 1e-6
# Step 4: both sides evaluate the same Python double expressions, so every lr is bit-identical.
LR = 0.0
# Step 4, loss_NN: fp32 drift of two correct ports grows to 6e-7 by loss_09 on MiniLM (1.2e-7 on the
# tests' tiny model); float64 twins agree to 6e-14, so it is rounding, not a different update rule.
BP_LOSS = 1e-6
# Step 4, grad_*: clean <= 3.9e-8 on MiniLM, 5.2e-8 tiny; Paddle's LayerNorm epsilon 1e-5 makes
# 3.4e-5 / 3.1e-6.
BP_GRAD = 3e-7
# Step 4, update_*: [mean, mean |.|] of each parameter's total change over the iterations. Clean
# <= 1.2e-9 on MiniLM, 5.3e-9 tiny; weight decay on LayerNorm and bias makes 2.1e-6 / 3.3e-6, which
# the losses barely catch (1.01e-6) or miss (2.4e-7).
BP_UPDATE = 1e-7
# Step 5: dev accuracy, the guide's 0.15% for SST-2 (one dev sentence is 1/872 = 0.00115).
ACCURACY = 0.0015
# Step 5, the loss at every step when both sides train alike (no dropout, or shared masks): fp32
# drift grows over steps (reference run, shared dropout: 1.1e-5 at most over 2,105 MiniLM steps);
# a wrong data order, mask or update differs by ~1e-1 within a few steps.
TRAIN_LOSS = 1e-3
