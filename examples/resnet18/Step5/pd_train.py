"""Step 5, paddle side: paddle.vision's resnet18 from the converted weights, trained on the digits' training set in
the seeded order with Momentum, L2Decay and CosineAnnealingDecay (resnet.TRAIN), evaluated on the test
set after each epoch -> train_align_paddle.npy (the last evaluation: accuracy, macro F1) and train_log_paddle.npy
(each step's loss, lr, weight norm, dropout/BatchNorm modes and batch), each with its run record.

    python examples/resnet18/Step5/pd_train.py                  # the whole training
    python examples/resnet18/Step5/pd_train.py --max_steps 4    # a quick run: the first 4 steps
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import paddle

from examples.resnet18 import resnet
from portcheck.pipeline import training
from portcheck.pipeline.data import each_batch
from portcheck.core.errors import run_main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--max_steps", type=resnet.positive, help="stop after this many steps, then evaluate "
                    "(the schedule stays the whole training's)")
    args = ap.parse_args()
    model, weights = resnet.paddle_model()
    # torch's unbiased running-variance update, which eval mode then uses (Paddle's is the biased one: 1.6% apart
    # at n = 64 values per channel in the last stages, a batch of 64 at 1 x 1)
    training.torch_running_var(model)
    opt, sched, lr_now = resnet.paddle_trainer(model, resnet.TRAIN["epochs"] * resnet.steps_per_epoch())
    test, log = resnet.split()[1], training.TrainingLog()
    for epoch, order in enumerate(resnet.train_orders()):
        model.train()
        for images, labels in each_batch(resnet.paddle_loader(order, resnet.TRAIN["batch"], drop_last=True)):
            lr = lr_now()
            loss = paddle.nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            opt.step()
            sched.step()
            log.step(loss, lr, model=model, batch=labels)  # before the gradients are cleared: they are logged too
            opt.clear_grad()
            if len(log.curves["loss"]) == args.max_steps:
                break
        model.eval()
        with paddle.no_grad():
            images, labels = next(each_batch(resnet.paddle_loader(test, len(test))))
            log.evaluate(resnet.paddle_metric(model(images).argmax(-1), labels), model=model)
        print(f"epoch {epoch}: {len(log.curves['loss'])} steps, loss {log.curves['loss'][-1]:.4f}, test accuracy "
              f"{log.evals['accuracy'][-1]:.4f}", flush=True)
        if len(log.curves["loss"]) == args.max_steps:
            break
    path = log.save(resnet.step_dir(5), "paddle", resnet.train_depends(weights, args.max_steps),
                    f"{resnet.FOLDER}/Step5/pd_train.py")
    print(f"wrote {resnet.shown(path)}: " + ", ".join(f"{k} {float(v):.4f}" for k, v in log.final().items()))


if __name__ == "__main__":
    run_main(main)
