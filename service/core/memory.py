"""Memory the server frees goes back to the system: a fixed mmap threshold and two heaps
keep Pillow's large decode buffers from lingering (glibc only)."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("groundsearch.service")
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
#: mallopt's settings, in the order they are made: bytes, bytes, heaps.
SETTINGS = {M_MMAP_THRESHOLD: 4 * 1024 * 1024, M_TRIM_THRESHOLD: 8 * 1024 * 1024, M_ARENA_MAX: 2}


def return_freed_memory() -> bool:
    """Tune this process's malloc as above; False where there is no glibc."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    ok = all(mallopt(option, value) for option, value in SETTINGS.items())
    if not ok:
        log.warning("mallopt refused a setting: freed memory may stay with the process")
    return bool(ok)
