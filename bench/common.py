"""Helpers the benchmarks share."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def latency(ms: Sequence[float], quantiles: Iterable[int] = (50, 99), digits: int = 2) -> dict:
    """``{"p50_ms": …, "p99_ms": …}`` of millisecond samples (numpy's linear percentiles)."""
    values = np.asarray(ms, np.float64)
    return {f"p{q}_ms": round(float(np.percentile(values, q)), digits) for q in quantiles}
