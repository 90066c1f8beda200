"""Runs CPython 3.15's own test_binary_format with _remote_debugging's BinaryWriter and
BinaryReader replaced by this package's.

    python3.15 cpython_suite.py TESTSUITE_LIB [unittest arguments...]

TESTSUITE_LIB is the folder holding the `test` folder of Debian's libpython3.15-testsuite
(its usr/lib/python3.15). Every test of the module runs; the exit status is unittest's. The
classes are swapped before the test module is imported, and checked to be ours after the
run, so a pass cannot come from CPython's own classes.
"""
import os
import sys
import unittest

# Debian splits the `test` package: its __init__ and support come with the standard library,
# the test modules with the test suite.
import test  # noqa: E402

test.__path__.append(os.path.join(sys.argv[1], "test"))

import _remote_debugging  # noqa: E402
import tachyon_profiles  # noqa: E402

assert tachyon_profiles.USES_CPYTHON_TYPES, "on 3.15 the package must use CPython's types"
_remote_debugging.BinaryWriter = tachyon_profiles.BinaryWriter
_remote_debugging.BinaryReader = tachyon_profiles.BinaryReader

from test.test_profiling.test_sampling_profiler import test_binary_format  # noqa: E402

suite = unittest.defaultTestLoader.loadTestsFromModule(test_binary_format)
result = unittest.TextTestRunner(verbosity=int(sys.argv[2]) if len(sys.argv) > 2 else 1).run(suite)
assert _remote_debugging.BinaryWriter is tachyon_profiles.BinaryWriter
assert _remote_debugging.BinaryReader is tachyon_profiles.BinaryReader
print(f"CPython's test_binary_format with tachyon_profiles: {result.testsRun} run, "
      f"{len(result.failures)} failures, {len(result.errors)} errors, {len(result.skipped)} skipped")
sys.exit(0 if result.wasSuccessful() and not result.skipped else 1)
