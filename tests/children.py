"""Whether a test left a forked child behind (verify's and export's second processes)."""

from __future__ import annotations

import os


def no_children_left() -> bool:
    """True when this process has no child, running or unreaped."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False
