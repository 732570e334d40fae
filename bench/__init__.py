"""The harness and the `bench` command: generic over suites, it knows no kernel."""

import os
from pathlib import Path

from bench.envinfo import REPO_ROOT

__version__ = "0.3.0"  # the one version number: pyproject.toml reads it from here

# numba keeps its compiled loops beside their sources (__pycache__). An installed bench (no
# pyproject.toml above the package: not a clone) keeps them in the user's cache instead, so
# that it writes nothing into the install location but Python's own bytecode.
if "NUMBA_CACHE_DIR" not in os.environ and not (REPO_ROOT / "pyproject.toml").exists():
    import platformdirs

    os.environ["NUMBA_CACHE_DIR"] = str(Path(platformdirs.user_cache_dir("bench")) / "numba")
