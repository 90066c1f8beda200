"""Merge a fleet's profiles on a Dask cluster with tachyon_profiles.

    python dask_merge.py OUTPUT TO PROFILE_OR_FOLDER... [--scheduler tcp://host:8786]

Each task folds its share of the files into a `tachyon_profiles.Fold` in a worker (the
library reads and folds every file there, without the GIL); the partial folds combine in a
tree (`split_every` at a time) and the last one is written as TO. The result is byte for
byte what `tachyon merge PROFILES --to TO` writes: a fold's order depends on its content
alone, not on which worker folded what. Without --scheduler, a local cluster of worker
processes is started on the loopback.
"""
import argparse
import os

import dask.bag as db
import tachyon_profiles as tp


def merge_on_dask(paths, to, output=None, *, files_per_task=100, split_every=8, threads=False, keep_going=False):
    """Folds `paths` on the current Dask client's workers and writes the result as `to`."""
    bag = db.from_sequence(sorted(paths), partition_size=files_per_task)
    fold = bag.reduction(
        lambda files: tp.fold_files(list(files), to, threads=threads, keep_going=keep_going),
        tp.Fold.combined,
        split_every=split_every,
    ).compute()
    for why in fold.skipped:
        print(f"skipped {why}")
    return fold.write(to, output)


def profiles(paths):
    """Every file named, and every file under every folder named, in name order."""
    found = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                found += [os.path.join(root, n) for n in names]
        else:
            found.append(p)
    return sorted(found)


if __name__ == "__main__":
    from dask.distributed import Client, LocalCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("to", choices=tp.OUTPUTS)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--scheduler", help="a running cluster's scheduler address")
    parser.add_argument("--keep-going", action="store_true")
    args = parser.parse_args()
    if args.scheduler:
        client = Client(args.scheduler)
    else:
        client = Client(LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None))
    with client:
        merge_on_dask(profiles(args.paths), args.to, args.output, keep_going=args.keep_going)
