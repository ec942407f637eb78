"""Step 5, PyTorch side: fine-tune pt_bert on SST-2 and evaluate on dev after each epoch.

    python pipeline/Step5/pt_train.py --data_dir ../shared/data/SST-2            # one full epoch
    python pipeline/Step5/pt_train.py --data_dir ../shared/data/SST-2 --train_limit 640 --max_steps 20
    torchrun --nproc_per_node 2 pipeline/Step5/pt_train.py --data_dir ../shared/data/SST-2   # data-parallel

The loop, flags, data order and checkpoints are twins/train.py's, what PyTorch does
differently is twins/pt_backend.py; pd_train.py is this script's twin.
"""
try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2.twins import train
from portcheck.core.errors import run_main


def main():
    args = train.parse_args("torch")
    # imported once the flags are good: a bad one is refused in a second, not after torch has loaded
    from bert_sst2.twins import pt_data
    from bert_sst2.twins.pt_backend import Backend
    backend = Backend()
    train.run(backend, args, *train.load_data(pt_data, backend, args))


if __name__ == "__main__":
    run_main(main)
