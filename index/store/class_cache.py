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
    """``cache(ids)``: each photo's stored classes, in order, as two arrays (photos × k):
    class ids (int64, a row of -1 for a photo without) and probabilities (float64). A
    photo's classes never change once stored; those of a photo without any are read
    again next time (an indexing run may store them meanwhile)."""

    def __init__(self, read: ReadClasses, kept: int = CLASSES_KEPT) -> None:
        self.read, self.kept = read, kept
        self._clear()

    def _clear(self) -> None:
        self._row: dict[int, int] = {}  # photo id → its row (row 0: no classes)
        self._ids = np.full((1, 1), -1, np.int64)
        self._probs = np.zeros((1, 1), np.float64)

    def __call__(self, ids: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        want = np.asarray(ids, np.int64).tolist()
        missing = [i for i in want if i not in self._row]
        if missing:
            self._add(self.read(missing))
        rows = np.fromiter((self._row.get(i, 0) for i in want), np.int64, len(want))
        return self._ids[rows], self._probs[rows]

    def _add(self, found: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        if not found:
            return
        if len(self._row) + len(found) > self.kept:
            self._clear()
        width = max(self._ids.shape[1], *(len(c) for c, _ in found.values()))
        ids = np.full((len(found), width), -1, np.int64)
        probs = np.zeros((len(found), width), np.float64)
        for row, (c, p) in enumerate(found.values()):
            ids[row, : len(c)], probs[row, : len(p)] = c, p
        pad = width - self._ids.shape[1]
        self._ids = np.vstack([np.pad(self._ids, ((0, 0), (0, pad)), constant_values=-1), ids])
        self._probs = np.vstack([np.pad(self._probs, ((0, 0), (0, pad))), probs])
        start = len(self._ids) - len(found)
        self._row.update((i, start + row) for row, i in enumerate(found))
