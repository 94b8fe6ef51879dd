"""Python's cyclic garbage collector paused while a big input's rows are made: a million acyclic
objects (a diff's rows, the parts of each row's JSON) would have it walk every object that lives
long again and again (writing 857,000 rows took four times as long with it running)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside the block; as it was after (a caller's own pause is kept)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
