"""Photos' stored classes kept in memory (index.store.class_cache): every lookup as the
records say, each photo read once while kept, none lost when the cache is forgotten."""

from __future__ import annotations

import numpy as np

from groundsearch.index.store.class_cache import ClassCache

# photo id → (class ids, probabilities) of varied widths; every fifth photo has none
STORED = {
    i: (np.arange(i % 7 + 1, dtype=np.int64) + i, np.linspace(1.0, 0.1, i % 7 + 1))
    for i in range(1, 500)
    if i % 5
}


class Records:
    def __init__(self) -> None:
        self.read: list[int] = []

    def __call__(self, ids: list[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        self.read += ids
        return {i: STORED[i] for i in ids if i in STORED}


def check(ids: np.ndarray, classes: np.ndarray, probs: np.ndarray) -> None:
    for row, i in enumerate(ids.tolist()):
        if i not in STORED:
            assert (classes[row] == -1).all()
            continue
        k = len(STORED[i][0])
        assert (classes[row, :k] == STORED[i][0]).all() and (classes[row, k:] == -1).all()
        np.testing.assert_allclose(probs[row, :k], STORED[i][1])


def test_lookups_are_the_records_and_a_kept_photo_is_read_once() -> None:
    records = Records()
    cache = ClassCache(records)
    rng = np.random.default_rng(0)
    for _ in range(40):
        ids = rng.integers(1, 520, 60)
        check(ids, *cache(ids))
    with_classes = [i for i in records.read if i in STORED]
    assert len(with_classes) == len(set(with_classes))  # kept: never read again
    assert cache(np.array([], np.int64))[0].shape[0] == 0


def test_a_full_cache_forgets_and_still_answers_every_photo_asked() -> None:
    records = Records()
    cache = ClassCache(records, kept=50)
    rng = np.random.default_rng(1)
    for _ in range(30):
        ids = rng.integers(1, 520, 40)
        check(ids, *cache(ids))
