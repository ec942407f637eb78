"""Planted bugs for Step 5 (registered into tests/plant.py's runner)."""
from plant import plant


@plant("paddle_data_order")
def _():
    """One side trains in its own order: the permutation reversed (e.g. a DataLoader left on shuffle=True)."""
    from bert_sst2.twins import train
    order = train.epoch_order
    train.epoch_order = lambda *args, **kwargs: order(*args, **kwargs)[::-1]


def _paddle_shared_dropout(draw):
    """Paddle's shared-dropout layers take their mask from draw(stream, shape, p) instead."""
    import paddle
    from models import pd_bert

    def forward(self, x):
        if self.stream is None or not self.training or self.p == 0:
            return paddle.nn.Dropout.forward(self, x)
        return x * paddle.to_tensor(draw(self.stream, x.shape, self.p))
    pd_bert.Dropout.forward = forward


@plant("paddle_dropout_no_rescale")
def _():
    """Paddle applies the shared keep-mask but forgets the 1/(1-p) rescale (downscale_in_infer thinking)."""
    _paddle_shared_dropout(lambda stream, shape, p: stream.draw(shape, p) * (1 - p))


@plant("paddle_dropout_rate")
def _():
    """Paddle drops at a different rate than the config says (a hard-coded 0.2 instead of 0.1)."""
    _paddle_shared_dropout(lambda stream, shape, p: stream.draw(shape, 0.2))


@plant("paddle_rank_split")
def _():
    """Every Paddle process trains on the first slice of each global batch (the rank ignored), so half
    the data is seen twice and half never: what a sampler built without rank= does."""
    from bert_sst2 import data
    rank_order = data.rank_order
    data.rank_order = lambda order, batch_size, rank, world: rank_order(order, batch_size, 0, world)


@plant("sigkill_at_step_8")
def _():
    """Not a bug: an unclean stop (SIGKILL) as step 8 begins, for the resume test; both backends."""
    import os
    import signal

    from bert_sst2.twins import pd_backend, pt_backend
    for backend in (pt_backend.Backend, pd_backend.Backend):
        step = backend.train_step
        calls = []

        def train_step(self, *args, step=step, calls=calls):
            calls.append(1)
            if len(calls) == 8:
                os.kill(os.getpid(), signal.SIGKILL)
            return step(self, *args)
        backend.train_step = train_step


@plant("paddle_grouped_batches_unshuffled")
def _():
    """Paddle's length grouping forgets to shuffle the batches after sorting each chunk: the model then
    trains from the shortest sentences to the longest (a sampler written by hand, one step left out)."""
    from bert_sst2 import data
    group = data.group_by_length

    def unshuffled(order, lengths, batch_size, seed, chunk_batches=data.GROUP_CHUNK_BATCHES):
        chunk = chunk_batches * batch_size
        return [i for start in range(0, len(order), chunk)
                for i in sorted(order[start:start + chunk], key=lambda i: lengths[i])]
    data.group_by_length = unshuffled
    assert group  # the real one, kept for reference
