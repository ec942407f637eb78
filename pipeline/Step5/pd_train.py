"""Step 5, Paddle side: fine-tune pd_bert on SST-2 and evaluate on dev after each epoch.

    python pipeline/Step5/pd_train.py --data_dir ../shared/data/SST-2            # one full epoch
    python pipeline/Step5/pd_train.py --data_dir ../shared/data/SST-2 --train_limit 640 --max_steps 20
    python -m paddle.distributed.launch --nproc_per_node 2 pipeline/Step5/pd_train.py --data_dir ../shared/data/SST-2

The loop, flags, data order and checkpoints are twins/train.py's, what Paddle does
differently is twins/pd_backend.py; pt_train.py is this script's twin.
"""
try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None
from bert_sst2.twins import train
from portcheck.core.errors import run_main


def main():
    args = train.parse_args("paddle")
    # imported once the flags are good: a bad one is refused in a second, not after paddle has loaded
    from bert_sst2.twins import pd_data
    from bert_sst2.twins.pd_backend import Backend
    backend = Backend()
    train.run(backend, args, *train.load_data(pd_data, backend, args))


if __name__ == "__main__":
    run_main(main)
