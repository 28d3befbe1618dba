"""Helpers the benchmarks share (scripts import it as ``common``: bench/ is not a package)."""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import resource
import socket
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL import Image

# --------------------------------------------------------------------------- statistics


def percentile(
    values: Iterable[float], q: float, *, nearest: bool = False, digits: int | None = None
) -> float | None:
    """The ``q``-th percentile (0..100), numpy-linear or nearest-rank; None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    if nearest:
        value = float(ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))])
    else:
        value = float(np.percentile(np.asarray(ordered, np.float64), q))
    return value if digits is None else round(value, digits)


def latency(ms: Sequence[float], quantiles: Iterable[int] = (50, 99), digits: int = 2) -> dict:
    """``{"p50_ms": …, "p99_ms": …}`` of millisecond samples (numpy's linear percentiles)."""
    return {f"p{q}_ms": percentile(ms, q, digits=digits) for q in quantiles}


# --------------------------------------------------------------------------- timing


def timings_ms(fn: Callable[[], object], n: int, *, warm: bool = True, per: int = 1) -> list[float]:
    """Wall times (ms) of ``n`` calls of ``fn``, each over ``per``; an untimed one first if warm."""
    if warm:
        fn()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(1000 * (time.perf_counter() - start) / per)
    return out


def median_ms(fn: Callable[[], object], n: int = 30, *, warm: bool = True, per: int = 1) -> float:
    """The median of ``timings_ms(fn, n, warm=warm, per=per)``, to 0.01 ms."""
    return round(statistics.median(timings_ms(fn, n, warm=warm, per=per)), 2)


def exact_search_ms(base: np.ndarray, queries: np.ndarray, k: int = 10) -> float:
    """Median ms of one exact top-``k`` over ``base`` (product, partition), of 20 queries."""
    times = []
    for q in queries[:20]:
        t = time.perf_counter()
        s = base @ q
        np.argpartition(-s, k)[:k]
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1000


# --------------------------------------------------------------------------- data


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """``n`` random float32 vectors of ``dim`` numbers, each of length 1."""
    x = rng.normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def phone_exif(model: str, stamp: str | None = None) -> Image.Exif:
    """A phone's EXIF block: Apple ``model``, orientation 6, dates (``stamp``: DateTime), GPS."""
    from PIL import Image
    from PIL.TiffImagePlugin import IFDRational as R

    exif = Image.Exif()
    exif[0x010F], exif[0x0110], exif[0x0112] = "Apple", model, 6
    if stamp is not None:
        exif[0x0132] = stamp
    sub = exif.get_ifd(0x8769)
    sub[0x9003], sub[0x9011] = "2024:07:01 18:03:05", "+02:00"
    gps = exif.get_ifd(0x8825)
    gps[1], gps[2] = "N", (R(48, 1), R(51, 1), R(2988, 100))
    gps[3], gps[4] = "E", (R(2, 1), R(17, 1), R(4020, 100))
    return exif


def floats(text: str) -> list[float]:
    """``"0.5,1,2"`` as ``[0.5, 1.0, 2.0]`` (an argparse type)."""
    return [float(x) for x in text.split(",")]


# --------------------------------------------------------------------------- the machine


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (just now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ("" where it does not say)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return ""


def memory_gib() -> float | None:
    """The machine's memory (MemTotal) in GiB, to 0.1; None where it cannot be read."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        first = Path("/proc/meminfo").read_text().splitlines()[0]
        return round(int(first.split()[1]) / 1024**2, 1)
    return None


#: What ``machine`` tells by default (service_load, reliability_harness, search_*).
SERVICE_MACHINE = ("nproc", "cpu", "memory_gib", "python", "httpx")
#: What ``machine`` can tell, by name.
MACHINE_FACTS: dict[str, Callable[[], object]] = {
    "cpus": os.cpu_count,
    "cores": os.cpu_count,
    "nproc": lambda: len(os.sched_getaffinity(0)),  # the cores this process may use
    "cpu": lambda: cpu_model() or platform.processor() or "unknown",
    "memory_gib": memory_gib,
    "python": platform.python_version,
    "machine": platform.machine,
    "processor": lambda: platform.processor() or platform.machine(),
    "httpx": lambda: importlib.import_module("httpx").__version__,
}


def machine(*facts: str, **versions: object) -> dict[str, object]:
    """The named ``MACHINE_FACTS`` (default: the service benches' five), then ``versions``."""
    names = facts or SERVICE_MACHINE
    return {name: MACHINE_FACTS[name]() for name in names} | versions


# --------------------------------------------------------------------------- reports


def markdown_table(
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    align: str = "",
    escape: bool = False,
) -> list[str]:
    """A markdown table's lines (``align``: l/r per column; ``escape``: None and "" as –)."""

    def cell(value: object) -> str:
        if not escape:
            return str(value)
        if value is None or value == "":
            return "–"
        return str(value).replace("|", "\\|").replace("\n", " ")  # free text stays one cell

    rule = "".join("---:|" if a == "r" else "---|" for a in align.ljust(len(header), "l"))
    head = ["| " + " | ".join(header) + " |", "|" + rule]
    return head + ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
