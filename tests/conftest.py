"""Shared test set-up: the repository's tools/ directory is importable, and Ctrl-C is live."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO / "tools") not in sys.path:
    sys.path.insert(0, str(REPO / "tools"))

# A shell starts a background job (`make test &`, nohup) with SIGINT ignored, and every
# process it starts inherits that: the tests that interrupt a child (export, capture,
# verifier.forked) then saw no KeyboardInterrupt and failed. Handled here, SIGINT is back
# to its default in each child this run starts (exec resets a handled signal, never an
# ignored one), as in a run from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
