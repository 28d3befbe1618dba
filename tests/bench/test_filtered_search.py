"""bench/filtered_search.py: the drawn metadata and the filters picked on it."""

from __future__ import annotations

import numpy as np

from groundsearch.index.filters.conditions import PhotoFilter
from tests.bench import load_script


def test_the_drawn_metadata_gives_filters_near_their_target_shares():
    script = load_script("filtered_search")
    n = 50_000
    m = script.metadata(n)
    assert len(m["taken_at"]) == n and np.all(np.diff(m["event"]) >= 0)  # ids follow events
    assert 0.45 < np.mean(~np.isnan(m["lat"])) < 0.7  # 60 % of the events, 95 % of theirs
    assert 0.01 < np.mean(m["uploaded"]) < 0.03
    years = np.array([int(f.split("/")[2]) for f in m["folders"][m["event"]]])
    assert np.mean(years == 2024) > 4 * np.mean(years == 2015)  # later years hold more
    filters = script.choose_filters(m)
    for name, target in [("0.1% folder", 0.001), ("1% near", 0.01), ("10% camera", 0.1)]:
        where, passing = filters[name]
        PhotoFilter(**where)  # a valid filter
        assert target / 3 < passing.mean() < target * 3, name
    assert abs(filters["50% after"][1].mean() - 0.5) < 0.01
    for share in script.SWEEP:
        assert abs(filters[f"sweep {share:g}"][1].mean() - share) < 0.001 + share * 0.01
