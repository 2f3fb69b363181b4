"""The cyclic garbage collector's pace for verify and export.

Both build millions of small objects that live until they end (documents, records,
proofs, the public documents) and almost no garbage cycles: at the collector's default
pace (a young collection every 700 new containers) it walked them for nothing, about 10%
of a large bundle's verify and 0.5 s of a 10,000-record export. Cycles are still
collected, every 50,000 new containers; the price is memory held a little longer (export
of 10,000 records: about 425 MB at its peak instead of 310).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_GC_YOUNG = 50_000
_lock = threading.Lock()
_users = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Young collections every 50,000 new containers while any caller is inside (export
    verifies what it wrote inside its own); the caller's pace comes back after the last."""
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(max(_GC_YOUNG, _saved[0]), *_saved[1:])
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None:
                gc.set_threshold(*_saved)
