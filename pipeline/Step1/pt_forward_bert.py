"""Step 1, torch side: logits of pt_bert on the fake batch and on a real padded batch.

Also the same model in float64 (forward_modules_torch64.npy): torch's own fp32 error at each module, with
which check_step1.py shows align's measured verdict beside the tuned one."""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import torch

from bert_sst2 import diagnose, inputs, paths
from bert_sst2.twins.weights import torch_fingerprint, torch_model
from portcheck.core import record
from portcheck.forward.twin import float64
from portcheck.core.errors import run_main


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False).parse_args()
    model = torch_model()
    weights = torch_fingerprint(model)  # as loaded, before anything runs
    model.eval()  # dropout off: the two frameworks draw different masks
    fake_ids, _ = inputs.fake_batch()
    padded = {k: torch.from_numpy(v) for k, v in inputs.padded_batch().items()}

    def run(net):
        """Logits of both batches, and every watched module's output in run order for check_step1's diagnosis."""
        modules, tag = {}, ["fake"]
        hooks = [module.register_forward_hook(lambda m, i, out, name=name: modules.__setitem__(f"{tag[0]}/{name}", out.numpy()))
                 for name, module in diagnose.watched(net.named_modules())]
        results = {}
        with torch.no_grad():
            results["logits_fake"] = net(torch.from_numpy(fake_ids)).numpy()
            tag[0] = "padded"
            results["logits_padded"] = net(**padded).numpy()
        for hook in hooks:  # a copy of the model would copy them too
            hook.remove()
        return results, modules
    results, modules = run(model)
    # the same weights in float64: torch's own fp32 error, the yardstick of align's measured rule (shown beside)
    with float64(model):
        exact, exact_modules = run(model)
    # the long form, not portcheck.Side: this pair is two batches' logits (logits_fake, logits_padded), beside the
    # watched modules' outputs, each held to BERT's tuned tolerances (check_step1.py); Side's is one input's logits
    out = paths.step_dir(1) / "forward_torch.npy"
    depends = {"weights": weights, "inputs": record.fingerprint([("fake_ids", fake_ids), *inputs.padded_batch().items()])}
    record.save_results({out: results, out.with_name("forward_modules_torch.npy"): modules,
                         out.with_name("forward_modules_torch64.npy"): {**exact, **exact_modules}}, "torch",
                        "pipeline/Step1/pt_forward_bert.py", depends)
    print(f"wrote {out}")


if __name__ == "__main__":
    run_main(main)
