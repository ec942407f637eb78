"""Does PaDiff (PaddlePaddle/PaDiff) localise a planted bug in this project's twin BERTs?

PaDiff is not a dependency; install it aside and put it on PYTHONPATH for this run:

    pip install --no-deps --target /tmp/padiff_pkg padiff
    PYTHONPATH=/tmp/padiff_pkg python tools/padiff_eval.py

Runs padiff.auto_diff on the tiny random twins twice: aligned (should pass) and with
the Step 1 plant (encoder layer 1's attention-output LayerNorm epsilon 1e-3 on the
Paddle side; should fail and name that layer). Findings are in docs/bench/padiff.md.
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
import numpy as np
import paddle
import torch

from bert_sst2 import paths
from models import pd_bert, pt_bert
from models.configuration_bert import BertConfig
from tools import bench_doc

argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False).parse_args()
try:
    import padiff
except ImportError:
    raise SystemExit("error: padiff is not importable: install it aside and set PYTHONPATH (see --help)") from None

run = bench_doc.start()  # the facts docs/bench/padiff.md's header line says
config = BertConfig.from_json(paths.ROOT / "tests" / "tiny_config.json")
torch.manual_seed(0)
paddle.seed(0)
pt_model = pt_bert.BertForSequenceClassification(config).eval()
pd_model = pd_bert.BertForSequenceClassification(config)
pd_model.eval()
ids = np.random.RandomState(0).randint(1, 1000, (2, 8))
inputs = ({"input_ids": paddle.to_tensor(ids)}, {"input_ids": torch.tensor(ids)})

# auto_weights=True: PaDiff copies torch's weights into the Paddle model by its own module matching
verdicts = {"aligned": padiff.auto_diff(pd_model, pt_model, inputs, auto_weights=True, options={"atol": 1e-5})}
pd_model.bert.encoder.layer[1].attention.output.LayerNorm._epsilon = 1e-3
verdicts["planted LayerNorm eps"] = padiff.auto_diff(pd_model, pt_model, inputs, auto_weights=True,
                                                     options={"atol": 1e-5})
print(f"\npadiff {padiff.__version__}, paddle {paddle.__version__}, torch {torch.__version__}")
for name, ok in verdicts.items():
    print(f"{name}: auto_diff returned {ok}")
print(bench_doc.header(bench_doc.finish(run), "python tools/padiff_eval.py"))
print("the module PaDiff blames is marked '*** HERE ***' in diff_log/paddle_struct.log beside padiff's package")
