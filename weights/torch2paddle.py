"""Convert weights/torch_weight.bin into weights/paddle_weight.pdparams, verified.

BERT is one client of the library's converter (portcheck.convert): the script builds the twin torch BERT
(models/pt_bert.py) with the checkpoint loaded strictly, and the Paddle one (models/pd_bert.py), and the
library gives each tensor its Paddle name and layout by the type of the module that holds it (every nn.Linear
weight transposed, [out, in] in torch, [in, out] in Paddle, whatever it is called; name patterns miss a
Linear with an unusual name and catch an Embedding with a usual one). The twins share every module name, so
no name map is given. Before anything is written, every checkpoint key must fit the torch twin (missing,
unexpected and misshapen keys), and every torch tensor must fill exactly one Paddle parameter of its shape and
dtype, every Paddle parameter filled; otherwise the script lists every offending key at once and writes
nothing.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2 import paths
from bert_sst2.twins.weights import load_config, torch_model
from portcheck.mapping.convert import convert
from portcheck.core.errors import PipelineError, run_main


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False).parse_args()
    config = load_config()
    try:
        torch_bert = torch_model(head=False)  # strictly: every key and shape of the checkpoint, float32, finite
        # Paddle loads once the checkpoint is known to fit (torch_model loads torch): a refused one costs no Paddle
        from models import pd_bert
        state = convert(torch_bert, pd_bert.BertModel(config), path=paths.paddle_weight())
    except PipelineError as e:
        raise PipelineError(f"refusing to convert, nothing written: {e}") from None
    print(f"wrote {paths.paddle_weight()}: {len(state)} tensors, {state.transposed} Linear weights transposed, "
          "every key used once, every shape checked")


if __name__ == "__main__":
    run_main(main)
