"""The digits pair Step 2's and Step 5's tests take (tests/test_steps25.py) and tools/step5_rules.py measures on:
scikit-learn's digits (8x8 images, bundled, read offline) through a torch DataLoader and a paddle.io.DataLoader,
and a small convolutional network with BatchNorm (conv, BatchNorm, ReLU, pool, dropout, linear) written once per
framework, trained for 30 steps through a TrainingLog on each side. Needs numpy, torch, paddlepaddle and
scikit-learn."""
import functools

import numpy as np
import paddle
import torch
from sklearn.datasets import load_digits

from portcheck import convert
from portcheck.core import record
from portcheck.gradients.against_itself import moved_one_ulp
from portcheck.pipeline import data, training

MEAN, STD = 0.306, 0.376


def digits():
    images, labels = load_digits(return_X_y=True)
    return images.reshape(-1, 1, 8, 8).astype("float32"), labels.astype("int64")


IMAGES, LABELS = digits()


def torch_loader(indices, batch=32, mean=MEAN, shuffle=False, label_shift=0, drop_last=False):
    class Digits(torch.utils.data.Dataset):
        def __len__(self):
            return len(indices)

        def __getitem__(self, i):
            return (torch.from_numpy(IMAGES[indices[i]]) / 16 - mean) / STD, int(LABELS[indices[i]]) + label_shift
    return torch.utils.data.DataLoader(Digits(), batch_size=batch, shuffle=shuffle, drop_last=drop_last)


def paddle_loader(indices, batch=32, mean=MEAN, shuffle=False, label_shift=0, drop_last=False):
    class Digits(paddle.io.Dataset):
        def __len__(self):
            return len(indices)

        def __getitem__(self, i):
            return (paddle.to_tensor(IMAGES[indices[i]]) / 16 - mean) / STD, int(LABELS[indices[i]]) + label_shift
    return paddle.io.DataLoader(Digits(), batch_size=batch, shuffle=shuffle, drop_last=drop_last)


TRAIN, TEST = np.arange(320), np.arange(320, 480)
EPOCHS, BATCH, LR, MOMENTUM, WD = 3, 32, 0.2, 0.9, 5e-4
ADAMW_LR, ADAMW_WD = 0.01, 0.01
STEPS = EPOCHS * len(TRAIN) // BATCH


def torch_net(dropout=0.0):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Dropout(dropout),
                               torch.nn.Linear(32, 10))


def paddle_net(dropout=0.0):
    return paddle.nn.Sequential(paddle.nn.Conv2D(1, 8, 3, padding=1), paddle.nn.BatchNorm2D(8), paddle.nn.ReLU(),
                                paddle.nn.AdaptiveAvgPool2D(2), paddle.nn.Flatten(), paddle.nn.Dropout(dropout),
                                paddle.nn.Linear(32, 10))


def orders(seed=1):
    rng = np.random.RandomState(seed)
    return [TRAIN[rng.permutation(len(TRAIN))] for _ in range(EPOCHS)]


def accuracy(predictions, labels):
    return {"accuracy": int((predictions == labels).sum()) / len(labels)}


def train(side, wd=WD, lr_ahead=False, no_train_after_eval=False, order_seed=1, convert_weights=True, dropout=0.0,
          adamw=False, both_dropout=0.0, mask_seed=0, label_smoothing=0.0, moved=None):
    """One side's training through a TrainingLog: (its arrays, its run record's depends). adamw: AdamW at lr 0.01
    (weight decay wd) instead of momentum SGD: the conv bias before the BatchNorm, whose gradient is rounding noise,
    then moves by +-lr with a sign rounding picks. moved: a seed, torch's weights moved one ulp by it (one of its
    own runs, backward.moved_one_ulp)."""
    log, pt = training.TrainingLog(), torch_net(both_dropout)
    weights = record.model_fingerprint(pt)
    if moved is not None:
        moved_one_ulp(pt, moved)
    lr = ADAMW_LR if adamw else LR
    if side == "torch":
        model = pt
        torch.manual_seed(mask_seed)  # the dropout masks: each framework draws its own
        opt = (torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd) if adamw else
               torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=wd))
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, STEPS)
        lr_now, loss_fn, grad = (lambda: opt.param_groups[0]["lr"]), torch.nn.functional.cross_entropy, torch.no_grad
    else:
        paddle.seed(mask_seed)
        model = paddle_net(dropout or both_dropout)
        if convert_weights:
            model.set_state_dict(convert(pt, model))
        else:
            weights = record.model_fingerprint(model)
        sched = paddle.optimizer.lr.CosineAnnealingDecay(lr, STEPS)
        opt = (paddle.optimizer.AdamW(learning_rate=sched, parameters=model.parameters(), weight_decay=wd) if adamw else
               paddle.optimizer.Momentum(learning_rate=sched, momentum=MOMENTUM, parameters=model.parameters(),
                                         weight_decay=paddle.regularizer.L2Decay(wd)))
        lr_now, grad = opt.get_lr, paddle.no_grad
        loss_fn = functools.partial(paddle.nn.functional.cross_entropy, label_smoothing=label_smoothing)
        if lr_ahead:  # the schedule stepped once before the first step
            sched.step()
    loader = torch_loader if side == "torch" else paddle_loader
    model.train()
    for order in orders(order_seed):
        for images, labels in loader(order, BATCH):
            lr_step = lr_now()
            loss = loss_fn(model(images), labels)
            loss.backward()
            opt.step()
            sched.step()
            log.step(loss, lr_step, model=model, batch=labels)  # before the gradients are cleared: they are logged too
            (opt.zero_grad if side == "torch" else opt.clear_grad)()
        model.eval()
        with grad():
            images, labels = next(data.each_batch(loader(TEST, len(TEST))))
            log.evaluate(accuracy(model(images).argmax(-1), labels), model=model)
        if not no_train_after_eval:
            model.train()
    depends = training.run_depends(weights, orders(order_seed), {"order": order_seed},
                                   {"lr": LR, "momentum": MOMENTUM, "weight_decay": WD, "epochs": EPOCHS})
    return log, depends
