"""Paths shared by the harness tests (a plain module: conftest names clash across test dirs)."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("YARD_BIN", REPO / "build" / "bin"))
# Let the tests run from a plain checkout too (without `pip install -e python/`).
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))
