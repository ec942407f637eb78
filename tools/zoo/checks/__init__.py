"""The zoo's pairs, each side written as a user writes it, and judged through portcheck's public API alone.

A check takes a case of tools/zoo/cases.py and one of its plants (None: the correct port) and returns its
Judgements: one per rule the library applied (the lr pair's exact rule, compare_backward's measured rule...),
each with whether it passed, how much of its allowance it used, and where the library said the two part.
Nothing here decides a verdict: the library does; tools/zoo/run.py compares it with the table's.

Every side is built from its framework's own classes: torch's on the torch side, Paddle's on the Paddle side.
A plant is an override of the Paddle side's settings (cases.py), never an edit of the library.

Each check is in the module of the kind of pair it judges: optimizers (Step 4's schedulers and optimizers), values
(Steps 2 and 3: a loss, a metric, a loader's batches), models (Steps 1 and 4: model pairs, the habits' among them)
and training (Step 5); judging holds what they share (Judgement), tiny the models and data they build alike.
"""
from tools.zoo.checks import models, optimizers, training, values

# a case's "check": the function that judges its pair
CHECKS = {"scheduler": optimizers.scheduler, "optimizer": optimizers.optimizer, "loss": values.loss,
          "metric": values.metric, "model": models.model, "loader": values.loaders, "training": training.trainings}
