"""Keeps freed memory inside the process, so that training steps stop paying for page faults.

glibc serves each allocation above a threshold (tensors of a few MB: activations, gradients, the
embedding gradient) with a fresh mmap and returns it to the OS when freed; every training step then
touches new pages, and the kernel zero-fills each one. On a 2-core CPU that was 15-25% of a BERT
fine-tuning step. Serving all allocations from the heap and never trimming it makes a step reuse the
pages of the one before. The cost is that the process keeps its peak memory until it exits, which is
what a training run does anyway. Only glibc on Linux has these knobs; elsewhere this does nothing.
BERTLAB_SYSTEM_MALLOC=1 leaves the allocator as it is.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_INT_MAX = 2**31 - 1


def keep_freed_memory() -> bool:
    """Tells glibc's malloc to use no mmap and to keep freed heap memory; True when it took effect."""
    if not sys.platform.startswith("linux") or os.environ.get("BERTLAB_SYSTEM_MALLOC") == "1":
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl, …)
        return False
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, _INT_MAX))
