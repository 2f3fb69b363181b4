"""Putting a finished file in place without ever replacing one that appeared meanwhile."""

from __future__ import annotations

import os
from pathlib import Path


def link_into_place(temporary: Path, target: Path) -> None:
    """Move `temporary` to `target`; FileExistsError, with `temporary` left, if `target`
    exists. A hard link refuses an existing target atomically; where the file system has no
    hard links, the check and the rename are two steps."""
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise
    except OSError:  # no hard links on this file system
        if os.path.lexists(target):
            raise FileExistsError(str(target)) from None
        os.rename(temporary, target)
    else:
        temporary.unlink()
