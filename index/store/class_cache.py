"""Photos' stored classes kept in memory as arrays: relevance reads those of up to 1,000
hits a query, at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

#: Reads the stored classes (ids, probabilities) of the photos among ids that have them.
ReadClasses = Callable[[list[int]], dict[int, tuple[np.ndarray, np.ndarray]]]
#: Photos whose classes are kept (then forgotten all at once and read again).
CLASSES_KEPT = 200_000


class ClassCache:
    """``cache(ids)``: each photo's stored class ids (a row of -1 for a photo without)
    and probabilities, as two arrays (photos × k)."""

    def __init__(self, read: ReadClasses, kept: int = CLASSES_KEPT) -> None:
        self.read, self.kept = read, kept
        self._clear()

    def _clear(self) -> None:
        self._known = np.empty(0, np.int64)  # photo ids kept, sorted
        self._rows = np.empty(0, np.int64)  # the row of each (row 0: no classes)
        self._size = 1  # rows in use; the tables grow by doubling
        self._ids = np.full((16, 1), -1, np.int64)
        self._probs = np.zeros((16, 1), np.float64)

    def _lookup(self, want: np.ndarray) -> np.ndarray:
        """Each photo's row, 0 where it is not kept."""
        if not self._known.size:
            return np.zeros(want.shape, np.int64)
        pos = np.minimum(np.searchsorted(self._known, want), self._known.size - 1)
        return np.where(self._known[pos] == want, self._rows[pos], 0)

    def __call__(self, ids: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        want = np.asarray(ids, np.int64)
        rows = self._lookup(want)
        if not rows.all():
            missing = np.unique(want[rows == 0])
            if self._known.size + missing.size > self.kept:  # forget all, keep these
                self._clear()
                missing = np.unique(want)
            self._add(self.read(missing.tolist()))
            rows = self._lookup(want)
        return self._ids[rows], self._probs[rows]

    def _add(self, found: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        if not found:
            return
        width = max(self._ids.shape[1], *(len(c) for c, _ in found.values()))
        end = self._size + len(found)
        if end > len(self._ids) or width > self._ids.shape[1]:
            rows = max(end, 2 * len(self._ids))
            ids = np.full((rows, width), -1, np.int64)
            probs = np.zeros((rows, width), np.float64)
            n, w = self._size, self._ids.shape[1]
            ids[:n, :w], probs[:n, :w] = self._ids[:n], self._probs[:n]
            self._ids, self._probs = ids, probs
        for row, (c, p) in enumerate(found.values(), start=self._size):
            self._ids[row, : len(c)], self._probs[row, : len(p)] = c, p
        known = np.concatenate([self._known, np.fromiter(found, np.int64, len(found))])
        rows_of = np.concatenate([self._rows, np.arange(self._size, end, dtype=np.int64)])
        order = np.argsort(known, kind="stable")
        self._known, self._rows, self._size = known[order], rows_of[order], end
