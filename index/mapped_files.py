"""Telling the kernel how a memory-mapped index file is read.

A compressed index's float16 re-rank codes are read at random, 1,280 bytes a candidate,
but the kernel's default read-ahead for a mapping brings in up to 128 KB around each
page fault: a 10M-vector gallery's server then holds gigabytes of pages it never reads
(docs/BENCHMARKS.md, "Scale"). ``advise_random`` marks every mapping of a file
``MADV_RANDOM`` (no read-ahead), found in ``/proc/self/maps`` since FAISS does not expose
its mapping. Linux only; elsewhere, or if the call fails, nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)
MADV_RANDOM = 1


def mappings(path: Path) -> list[tuple[int, int]]:
    """(start, length) of each mapping of ``path`` in this process."""
    target = str(Path(path).resolve())
    out = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].rstrip("\n") == target:
                    start, end = (int(x, 16) for x in parts[0].split("-"))
                    out.append((start, end - start))
    except OSError:
        return []
    return out


def advise_random(path: Path) -> int:
    """Mark the mappings of ``path`` for random access; returns the bytes advised."""
    found = mappings(path)
    if not found:
        return 0
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    advised = 0
    for start, length in found:
        if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(length), MADV_RANDOM) == 0:
            advised += length
        else:
            log.warning("madvise(%s): %s", path, os.strerror(ctypes.get_errno()))
    return advised
