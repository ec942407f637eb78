"""Dropout masks both frameworks reproduce exactly (Step 5 --shared_dropout).

torch and Paddle each draw dropout masks from their own random generator, so two
correct ports train on different noise and end a run a few dev sentences apart
by chance. With a MaskStream attached (models' set_dropout_stream), every
dropout layer of both twins takes its keep-mask from one numpy generator instead.
The twins call their dropout layers in the same order with the same shapes, so
both sides draw identical masks; the stream is reseeded from (seed, step) before
every step, which also makes a resumed run draw what an uninterrupted one would.
"""
import numpy as np


class MaskStream:
    def __init__(self, seed=0):
        self.reseed(seed)

    def reseed(self, seed):
        self.rng = np.random.default_rng(seed)

    def draw(self, shape, p: float) -> np.ndarray:
        """A float32 array of 0 and 1/(1-p): the inverted-dropout multiplier, x * mask / (1 - p) folded
        into one factor so that applying it is a single exact multiply in either framework."""
        keep = self.rng.random(tuple(shape), dtype=np.float32) >= p
        return keep.astype(np.float32) * np.float32(1.0 / (1.0 - p))
