"""How a memory-mapped index file is read: ``advise_random`` (no read-ahead) and
``gather`` (rows read by several threads)."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
MADV_RANDOM = 1
#: threads that read a large store's rows at once (more gained nothing: BENCHMARKS)
READERS = 32


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


def larger_than_memory(nbytes: int) -> bool:
    """Whether a file of ``nbytes`` is more than half this machine's memory (then most
    rows a search reads come from the disk)."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return False
    return nbytes > memory // 2


@cache
def _readers(n: int, pid: int) -> ThreadPoolExecutor:
    """``n`` reader threads of process ``pid`` (a forked child makes its own)."""
    return ThreadPoolExecutor(n, thread_name_prefix="store-reader")


def gather(rows: np.ndarray, pos: np.ndarray, readers: int = 0) -> np.ndarray:
    """``rows[pos]`` as a new array, read by ``readers`` threads (if > 1) in file order."""
    pos = np.asarray(pos, np.int64)
    if readers <= 1 or pos.size < 2 * readers:
        return np.ascontiguousarray(rows[pos])
    out = np.empty((pos.size, *rows.shape[1:]), rows.dtype)

    def read(part: np.ndarray) -> None:
        out[part] = rows[pos[part]]

    list(_readers(readers, os.getpid()).map(read, np.array_split(np.argsort(pos), readers)))
    return out
