"""Step 1, torch side: transformers' ResNet-18 in eval mode on the batch of digits, every module's output recorded.

forward_torch.npy holds the logits (the guide's pair); forward_modules_torch.npy every module's output, from
which check_step1.py names the module where the two models part.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from examples.resnet18 import resnet
from portcheck import record_forward
from portcheck.mapping.trace import stopped
from portcheck.core.errors import PipelineError, run_main
from portcheck.pipeline.handin import model_output, save_side


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False).parse_args()
    model, weights = resnet.torch_model()
    images, _ = resnet.batch()
    rec = record_forward(model.eval(), images)
    out, depends, script = resnet.step_dir(1), resnet.depends(weights), f"{resnet.FOLDER}/Step1/pt_forward.py"
    save_side(out, "forward_modules", "torch", rec, depends, script)
    if stopped(rec):  # what ran is saved: the check names the module where the two models part
        raise PipelineError(f"the model stopped ({stopped(rec)[:200]}); run `python {resnet.FOLDER}/Step1/check_step1.py` "
                            "to name the module where the two models part")
    path = save_side(out, "forward", "torch", {"logits": model_output(rec)}, depends, script,
                     exact={"logits": model_output(rec, exact=True)})  # torch's float64 run: the yardstick
    print(f"wrote {resnet.shown(path)}")


if __name__ == "__main__":
    run_main(main)
