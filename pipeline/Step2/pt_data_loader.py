"""Step 2, torch side: every tokenized example and every batch of twins/pt_data.py's loader.

    python pipeline/Step2/pt_data_loader.py                      # the demo set (40 sentences)
    python pipeline/Step2/pt_data_loader.py --data_dir ../shared/data/SST-2   # its dev.tsv
"""
import argparse

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

from bert_sst2 import data, flags, hparams, paths
from portcheck.core import record
from portcheck.core.errors import run_main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--data_dir", help="a GLUE SST-2 folder: use its dev.tsv instead of the demo set")
    ap.add_argument("--seed", type=int, default=hparams.SEED, help="seed of the example order both sides share")
    args = ap.parse_args()
    flags.check(("--seed", args.seed, flags.SEED))
    # imported once the flags are good: a bad one is refused in a second, not after transformers has loaded
    from bert_sst2.twins import pt_data
    dataset = pt_data.load_split("dev", args.data_dir) if args.data_dir else pt_data.load_tsv(paths.DEMO_TSV)
    tokenizer = pt_data.tokenizer()
    encoded = pt_data.encode(dataset, tokenizer)
    # a seeded permutation, as Step 5 passes: the loader must follow it exactly
    loader = pt_data.loader(encoded, tokenizer, order=data.permutation(len(encoded), args.seed))
    results = data.record(list(encoded), ({k: v.numpy() for k, v in b.items()} for b in loader))
    # the long form, not Side.data: this pair is every tokenized example and every batch with the set's length
    # (bert_sst2/data.record), bound to the rows read; Side.data's is the first batches of a loader
    out = paths.step_dir(2) / "data_torch.npy"
    record.save_results({out: results}, "torch", "pipeline/Step2/pt_data_loader.py",
                {"rows": data.fingerprint_rows(dataset), "flags": vars(args) | {"data_dir": None}})
    print(f"wrote {out}: {len(encoded)} examples, {len(loader)} batches")


if __name__ == "__main__":
    run_main(main)
