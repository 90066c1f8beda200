import signal
import sys

from . import _native


def main(argv=None):
    """Run the `tachyon` command (the same command `cargo install tachyon` builds) on argv
    (default: sys.argv[1:]) and return its exit status: 0 done, 1 a bad or unreadable input,
    2 a usage error. `tachyon ARGS` and `python -m tachyon_profiles ARGS` call it. While it
    runs, Ctrl-C ends the process, as it ends the native command."""
    args = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Python's own SIGINT handler would wait for the call to return. A closed pipe is an error
    # either way: Python and Rust both ignore SIGPIPE.
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    except ValueError:  # not the main thread, where only the main thread may set handlers
        previous = None
    try:
        return _native.run_command(["tachyon", *args])
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
