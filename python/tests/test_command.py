"""The `tachyon` command pip installs is the cargo-built one: same output bytes, same messages,
same exit codes.

    PYTHON test_command.py      (PYTHON: the virtual environment the package is installed in)

Environment: TACHYON_CLI (the cargo-built command; default target/release/tachyon). The
installed command is the `tachyon` script beside this Python (the environment's bin/), and
`python -m tachyon_profiles` is compared too.
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CARGO_BUILT = os.environ.get("TACHYON_CLI", os.path.join(ROOT, "target", "release", "tachyon"))
INSTALLED = os.path.join(os.path.dirname(sys.executable), "tachyon")
EXAMPLE = os.path.join(ROOT, "examples", "stdlib_work.pyb")
GPERFTOOLS = os.path.join(ROOT, "qemu-tests", "fixtures", "recorded", "gperftools-2.10", "x86_64")


def run(command, args, cwd):
    r = subprocess.run([*command, *args], capture_output=True, cwd=cwd, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


class SameCommand(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        data = open(EXAMPLE, "rb").read()
        # A file cut in its sample region: both commands must refuse it with the same offset.
        with open(os.path.join(t, "truncated.pyb"), "wb") as f:
            f.write(data[: len(data) // 2])
        with open(os.path.join(t, "empty.pyb"), "wb"):
            pass

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def same(self, args, expect_status):
        """Runs both commands with args in the same folder; output files they name with -o are
        compared after each run."""
        t = self.tmp.name
        results = []
        for command in ([CARGO_BUILT], [INSTALLED]):
            status, out, err = run(command, args, t)
            written = None
            if "-o" in args:
                path = os.path.join(t, args[args.index("-o") + 1])
                written = open(path, "rb").read()
                os.remove(path)
            results.append((status, out, err, written))
        (s1, o1, e1, w1), (s2, o2, e2, w2) = results
        self.assertEqual(s1, expect_status, e1.decode(errors="replace"))
        self.assertEqual(s2, s1, e2.decode(errors="replace"))
        self.assertEqual(o2, o1)
        self.assertEqual(e2, e1)
        self.assertEqual(w2, w1)
        return o1, e1

    def test_the_installed_command_is_a_console_script_of_this_environment(self):
        self.assertTrue(os.access(INSTALLED, os.X_OK), INSTALLED)
        self.assertNotEqual(os.path.realpath(INSTALLED), os.path.realpath(CARGO_BUILT))

    def test_collapsed_stacks(self):
        out, _ = self.same(["convert", EXAMPLE, "--to", "collapsed"], 0)
        self.assertGreater(out.count(b"\n"), 10)

    def test_info_text_and_json(self):
        out, _ = self.same(["info", EXAMPLE], 0)
        self.assertIn(b"sample_count", out)
        self.same(["info", "--json", "--records", EXAMPLE], 0)

    def test_files_written_with_o(self):
        self.same(["convert", EXAMPLE, "--to", "flamegraph", "--title", "T", "-o", "flame.svg"], 0)
        self.same(["convert", EXAMPLE, "--to", "pprof", "-o", "p.pb.gz"], 0)
        # A gperftools profile symbolized from its binaries (DWARF, inlined frames).
        out, _ = self.same(["convert", os.path.join(GPERFTOOLS, "workload.prof"), "--to", "pstats-text",
                            "--limit", "5", "--binary-path", os.path.join(GPERFTOOLS, "bins")], 0)
        self.assertIn(b"merge_runs", out)

    def test_bad_input_exits_1_with_the_same_message(self):
        for args in (["verify", "truncated.pyb"], ["info", "truncated.pyb"],
                     ["convert", "truncated.pyb", "--to", "collapsed"], ["info", "empty.pyb"],
                     ["info", "missing.pyb"]):
            with self.subTest(args=args):
                _, err = self.same(args, 1)
                self.assertTrue(err.startswith(b"tachyon: "), err)

    def test_usage_help_and_version(self):
        self.same([], 2)
        self.same(["--bogus"], 2)
        self.same(["convert", EXAMPLE, "--to", "no-such-format"], 2)
        out, _ = self.same(["--help"], 0)
        self.assertIn(b"Usage: tachyon", out)
        self.same(["convert", "--help"], 0)
        out, _ = self.same(["--version"], 0)
        self.assertTrue(out.startswith(b"tachyon "), out)

    def test_python_dash_m(self):
        for args, status in ((["--help"], 0), (["info", EXAMPLE], 0), (["verify", "truncated.pyb"], 1), ([], 2)):
            with self.subTest(args=args):
                self.assertEqual(run([sys.executable, "-m", "tachyon_profiles"], args, self.tmp.name),
                                 run([CARGO_BUILT], args, self.tmp.name))

    def test_main_returns_the_status_in_process(self):
        import tachyon_profiles

        self.assertEqual(tachyon_profiles.main(["--quiet", "verify", EXAMPLE]), 0)
        self.assertEqual(tachyon_profiles.main(["--quiet", "verify", os.path.join(self.tmp.name, "truncated.pyb")]), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
