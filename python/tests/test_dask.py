"""The merge on Dask (python/examples/dask_merge.py) equals `tachyon merge`, byte for byte.

    python test_dask.py FLEET_DIR      (dask, distributed and tachyon_profiles installed; run
                                        by scripts/fleet.sh)

A local Dask cluster of two worker processes on the loopback folds FLEET_DIR's 2,000 files
in tasks of 100, combining the partial folds in a tree; its pprof, OTLP and collapsed
outputs must be the bytes `tachyon merge FLEET_DIR --to …` writes. Also: the partial folds
really were made in the worker processes, a Fold pickles to its bytes and back, and the
package's own merge(), fold_files() and Fold.add() agree with the command, with any `jobs`.
"""
import glob
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

from dask.distributed import Client, LocalCluster

import tachyon_profiles as tp

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("TACHYON_CLI", os.path.join(ROOT, "target", "release", "tachyon"))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import dask_merge  # noqa: E402

FLEET = None


def command(files_or_dir, to, out):
    subprocess.run([CLI, "--quiet", "merge", files_or_dir, "--to", to, "-o", out], check=True)
    with open(out, "rb") as f:
        return f.read()


class DaskTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None)
        cls.client = Client(cls.cluster)
        cls.files = sorted(glob.glob(os.path.join(FLEET, "*.pyb")))
        assert len(cls.files) == 2000
        cls.tmp = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.close()

    def test_dask_result_is_the_commands(self):
        for to in ("pprof", "otlp", "collapsed"):
            with self.subTest(to=to):
                want = command(FLEET, to, os.path.join(self.tmp, f"cli.{to}"))
                got = dask_merge.merge_on_dask(self.files, to, files_per_task=100, split_every=4)
                if isinstance(got, str):
                    got = got.encode()
                self.assertEqual(got, want)

    def test_workers_are_processes_that_fold(self):
        workers = self.client.scheduler_info()["workers"]
        self.assertEqual(len(workers), 2)
        pids = self.client.run(os.getpid)
        self.assertNotIn(os.getpid(), pids.values())
        futures = self.client.map(lambda part: (os.getpid(), tp.fold_files(part, "pprof")), [self.files[:10], self.files[10:20]])
        results = self.client.gather(futures)
        self.assertTrue({pid for pid, _ in results} <= set(pids.values()))
        self.assertEqual(sum(f.profiles for _, f in results), 20)

    def test_fold_pickles_to_its_bytes(self):
        fold = tp.fold_files(self.files[:30], "collapsed")
        back = pickle.loads(pickle.dumps(fold))
        self.assertEqual(back.to_bytes(), fold.to_bytes())
        self.assertEqual((back.profiles, back.stacks, back.frames), (fold.profiles, fold.stacks, fold.frames))
        self.assertEqual(back.write("collapsed"), fold.write("collapsed"))
        with self.assertRaises(ValueError):
            tp.Fold.from_bytes(b"\x0a\x05junk")

    def test_package_merge_is_the_commands(self):
        want = command(FLEET, "pprof", os.path.join(self.tmp, "cli2.pprof"))
        self.assertEqual(tp.merge(FLEET, "pprof"), want)
        halves = [tp.fold_files(self.files[1000:], "pprof"), tp.fold_files(self.files[:1000], "pprof")]
        self.assertEqual(tp.Fold.combined(halves).write("pprof"), want)
        fold = tp.Fold()
        self.assertGreater(fold.add(self.files[1500:], "pprof"), 0)
        fold.add(self.files[:1500], "pprof")
        self.assertEqual((fold.profiles, fold.write("pprof")), (2000, want))
        # However many files are read at once (jobs=0: one per core), the same bytes.
        for jobs in (1, 3):
            with self.subTest(jobs=jobs):
                self.assertEqual(tp.merge(FLEET, "pprof", jobs=jobs), want)
                self.assertEqual(tp.fold_files(self.files, "pprof", jobs=jobs).write("pprof"), want)
                fold = tp.Fold()
                fold.add(self.files, "pprof", jobs=jobs)
                self.assertEqual(fold.write("pprof"), want)
        with self.assertRaises((TypeError, OverflowError)):
            tp.merge(FLEET, "pprof", jobs=-1)


if __name__ == "__main__":
    FLEET = sys.argv.pop(1)
    unittest.main(verbosity=2)
