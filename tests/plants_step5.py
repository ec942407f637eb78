"""Planted bugs for Step 5 (registered into tests/plant.py's runner)."""
from plant import plant


@plant("paddle_data_order")
def _():
    """One side trains in its own order: the permutation reversed (e.g. a DataLoader left on shuffle=True)."""
    from common import train
    order = train.epoch_order
    train.epoch_order = lambda n, epoch, seed: order(n, epoch, seed)[::-1]
