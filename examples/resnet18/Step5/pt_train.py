"""Step 5, torch side: transformers' ResNet-18 from the converted weights, trained on the digits' training set in
the seeded order with momentum SGD, weight decay and a cosine schedule (resnet.TRAIN), evaluated on the test
set after each epoch -> train_align_torch.npy (the last evaluation: accuracy, macro F1) and train_log_torch.npy
(each step's loss, lr, weight norm, dropout/BatchNorm modes and batch), each with its run record.

    python examples/resnet18/Step5/pt_train.py                  # the whole training
    python examples/resnet18/Step5/pt_train.py --max_steps 4    # a quick run: the first 4 steps
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import torch

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
    model, weights = resnet.torch_model()
    opt, sched, lr_now = resnet.torch_trainer(model, resnet.TRAIN["epochs"] * resnet.steps_per_epoch())
    test, log = resnet.split()[1], training.TrainingLog()
    for epoch, order in enumerate(resnet.train_orders()):
        model.train()
        for images, labels in each_batch(resnet.torch_loader(order, resnet.TRAIN["batch"], drop_last=True)):
            lr = lr_now()
            loss = torch.nn.functional.cross_entropy(model(images).logits, labels)
            loss.backward()
            opt.step()
            sched.step()
            log.step(loss, lr, model=model, batch=labels)  # before the gradients are cleared: they are logged too
            opt.zero_grad()
            if len(log.curves["loss"]) == args.max_steps:
                break
        model.eval()
        with torch.no_grad():
            images, labels = next(each_batch(resnet.torch_loader(test, len(test))))
            log.evaluate(resnet.torch_metric(model(images).logits.argmax(-1), labels), model=model)
        print(f"epoch {epoch}: {len(log.curves['loss'])} steps, loss {log.curves['loss'][-1]:.4f}, test accuracy "
              f"{log.evals['accuracy'][-1]:.4f}", flush=True)
        if len(log.curves["loss"]) == args.max_steps:
            break
    path = log.save(resnet.step_dir(5), "torch", resnet.train_depends(weights, args.max_steps),
                    f"{resnet.FOLDER}/Step5/pt_train.py")
    print(f"wrote {resnet.shown(path)}: " + ", ".join(f"{k} {float(v):.4f}" for k, v in log.final().items()))


if __name__ == "__main__":
    run_main(main)
