# The package is the native module (tachyon_profiles._native) plus the `tachyon` command's
# entry point; everything public comes from the native module.
from ._native import *  # noqa: F401,F403
from ._native import __doc__, __version__  # noqa: F401
from ._command import main  # noqa: F401
