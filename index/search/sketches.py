"""A low-dimensional copy of an index's vectors (the first ``DIMS`` principal components),
to score only the likeliest ``CANDIDATES_PER_HIT`` a hit among many ids; trusted only if
it keeps ``CHECK_RECALL`` of held-out queries' top 10."""

from __future__ import annotations

import numpy as np

__all__ = ["CANDIDATES_PER_HIT", "DIMS", "MIN_CANDIDATES", "Sketch", "SketchKeeper"]

#: Principal components kept (``bench/filtered_search.py``; 32 dims and 256 candidates
#: kept the exact top 10 of 1 % and 5 % of 300k synthetic vectors 99.9 % of the time).
DIMS = 32
#: Candidates scored exactly per hit asked for, and at least this many.
CANDIDATES_PER_HIT = 32
MIN_CANDIDATES = 256
CHECK_QUERIES = 40
CHECK_CANDIDATES = 256
CHECK_RECALL = 0.95


class Sketch:
    """Principal components of vectors (rows in the order of the index they copy)."""

    def __init__(self, mean: np.ndarray, basis: np.ndarray) -> None:
        self.mean, self.basis = mean.astype(np.float32), basis.astype(np.float32)
        self.rows = np.empty((0, basis.shape[1]), np.float32)
        self.n = 0

    @classmethod
    def train(cls, sample: np.ndarray, dims: int = DIMS, seed: int = 0) -> Sketch | None:
        """A sketch of ``sample``'s principal components, or None when untrustworthy."""
        sample = np.asarray(sample, np.float32)
        if sample.ndim != 2 or sample.shape[1] <= dims or sample.shape[0] < 5 * CHECK_CANDIDATES:
            return None
        rng = np.random.default_rng(seed)
        order = rng.permutation(sample.shape[0])
        queries = sample[order[:CHECK_QUERIES]]
        fit = sample[order[CHECK_QUERIES:]]
        mean = fit.mean(axis=0)
        _, _, vt = np.linalg.svd(fit - mean, full_matrices=False)
        sketch = cls(mean, vt[:dims].T)
        pool = fit[: max(fit.shape[0] // 5, 5 * CHECK_CANDIDATES)]
        rows = sketch.project(pool)
        kept = 0.0
        for q in queries:
            truth = np.argpartition(-(pool @ q), 10)[:10]
            found = np.argpartition(-(rows @ sketch.query(q)), CHECK_CANDIDATES)[:CHECK_CANDIDATES]
            kept += np.isin(truth, found).mean()
        return sketch if kept / len(queries) >= CHECK_RECALL else None

    def project(self, vectors: np.ndarray) -> np.ndarray:
        return np.asarray((vectors - self.mean) @ self.basis, np.float32)

    def query(self, query: np.ndarray) -> np.ndarray:
        return np.asarray(query @ self.basis, np.float32)

    def extend(self, vectors: np.ndarray) -> None:
        """Append the sketches of ``vectors`` (the next rows of the index)."""
        new = self.project(vectors)
        end = self.n + new.shape[0]
        if end > self.rows.shape[0]:
            capacity = max(end, int(self.rows.shape[0] * 1.5), 1024)
            grown = np.empty((capacity, new.shape[1]), np.float32)
            grown[: self.n] = self.rows[: self.n]
            self.rows = grown
        self.rows[self.n : end] = new
        self.n = end

    def best(self, query: np.ndarray, rows: np.ndarray, count: int) -> np.ndarray:
        """Where in ``rows`` (positions < ``n``) the ``count`` best sketch scores are."""
        if rows.size <= count:
            return np.arange(rows.size)
        scores = self.rows[rows] @ self.query(query)
        return np.argpartition(-scores, count - 1)[:count]


class SketchKeeper:
    """The sketch of one index's growing main: trained once it holds ``start`` vectors,
    tried again when it doubled after a failed check, extended, dropped on a rebuild."""

    def __init__(self, start: int, sample: int) -> None:
        self.start, self.sample = start, sample
        self._sketch: Sketch | None = None
        self._of: object = None  # the main it copies
        self._tried = 0  # the main's size when last trained

    def of(self, main: object, stored: np.ndarray) -> Sketch | None:
        """The sketch of ``main`` (vectors ``stored``), or None: too small or untrusted."""
        n = int(stored.shape[0])
        if n < self.start:
            return None
        if self._of is not main:  # main rebuilt
            self._sketch, self._of, self._tried = None, main, 0
        if self._sketch is None and (not self._tried or n >= 2 * self._tried):
            self._tried = n
            rows = np.random.default_rng(0).choice(n, size=min(n, self.sample), replace=False)
            self._sketch = Sketch.train(stored[np.sort(rows)])
        if self._sketch is not None:
            for begin in range(self._sketch.n, n, 100_000):
                self._sketch.extend(stored[begin : min(n, begin + 100_000)])
        return self._sketch
