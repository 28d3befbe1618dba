"""Pages of a ranking (index.ranking.pages): every order, page by page, without gaps or repeats,
with the ranking changing between pages."""

from __future__ import annotations

import random

import numpy as np
import pytest

from groundsearch.index.hits import Ranking
from groundsearch.index.ranking.pages import WINDOW, Cursor, CursorError, fingerprint, paginate


class Photos:
    """A gallery's ranking for one query: id → (score, taken_at); fetch counts its calls."""

    def __init__(self, rows: dict[int, tuple[float, float | None]]) -> None:
        self.rows = dict(rows)
        self.fetches: list[int] = []

    def fetch(self, n: int) -> Ranking:
        self.fetches.append(n)
        best = sorted(self.rows.items(), key=lambda kv: (-kv[1][0], kv[0]))[:n]
        taken = [np.nan if t is None else t for _, (_, t) in best]
        return Ranking(
            np.array([i for i, _ in best], np.int64),
            np.array([s for _, (s, _) in best], np.float64),
            np.array(taken, np.float64),
        )


def judge(ranking):
    return [min(1.0, max(0.0, s)) for s in ranking.scores]  # relevance = the score, clipped


def rows(n: int, seed: int = 0) -> dict[int, tuple[float, float | None]]:
    rng = random.Random(seed)
    out: dict[int, tuple[float, float | None]] = {}
    for i in range(1, n + 1):
        taken = None if i % 7 == 0 else float(rng.randrange(0, 10**9))
        out[i] = (round(rng.random(), 2), taken)  # rounded: many ties
    return out


def read_all(ranking: Photos, k: int, order: str, threshold: float | None, query: str = "q"):
    seen, cursor, pages = [], None, 0
    while True:
        page = paginate(ranking.fetch, judge, k, order, threshold, cursor, query)
        seen += [h.id for h in page.hits]
        pages += 1
        if page.next is None:
            return seen, page, pages
        cursor = Cursor.decode(page.next, order, query)


@pytest.mark.parametrize("order", ["relevance", "date", "-date"])
def test_pages_cover_the_ranking_in_order_without_repeats(order: str) -> None:
    ranking = Photos(rows(300))
    threshold = 0.5
    seen, last, pages = read_all(ranking, 7, order, threshold)
    assert len(seen) == len(set(seen))
    good = {i for i, (s, _) in ranking.rows.items() if s >= threshold}
    if order == "relevance":
        expect = sorted(ranking.rows, key=lambda i: (-ranking.rows[i][0], i))
        assert seen == expect  # every photo, weak ones too, in score order
    else:
        sign = 1 if order == "date" else -1
        dated = sorted(
            (i for i in good if ranking.rows[i][1] is not None),
            key=lambda i: (sign * ranking.rows[i][1], i),
        )
        undated = sorted(i for i in good if ranking.rows[i][1] is None)
        assert seen == dated + undated  # good matches only, undated last
    assert last.total == len(good) and last.total_exact
    assert pages == -(-len(seen) // 7)


def test_photos_added_and_removed_between_pages() -> None:
    ranking = Photos(rows(100, seed=1))
    page = paginate(ranking.fetch, judge, 10, "date", 0.3, None, "q")
    first = [h.id for h in page.hits]
    cut = Cursor.decode(page.next, "date", "q")
    # one photo before the cursor and one after it arrive; one unseen photo goes
    ranking.rows[1001] = (0.9, cut.key - 1.0)  # cut.key: taken_at (date order)
    ranking.rows[1002] = (0.9, cut.key + 1.0)
    gone = next(h for h in sorted(ranking.rows) if h not in first and ranking.rows[h][0] >= 0.3)
    del ranking.rows[gone]
    rest, cursor = [], cut
    while cursor is not None:
        page = paginate(ranking.fetch, judge, 10, "date", 0.3, cursor, "q")
        rest += [h.id for h in page.hits]
        cursor = Cursor.decode(page.next, "date", "q") if page.next else None
    assert 1001 not in rest and 1002 in rest and gone not in rest
    assert not set(first) & set(rest)
    still = {i for i, (s, _) in ranking.rows.items() if s >= 0.3 and i != 1001}
    assert set(first) | set(rest) == still  # nothing present at both requests skipped


def test_total_is_a_lower_bound_past_the_window() -> None:
    ranking = Photos({i: (0.99 - i / 1000, float(i)) for i in range(1, 101)})
    page = paginate(ranking.fetch, judge, 5, "relevance", 0.5, None, "q", window=40)
    assert page.total == 40 and not page.total_exact and len(page.hits) == 5
    page = paginate(ranking.fetch, judge, 5, "date", 0.5, None, "q", window=40)
    assert page.total == 40 and not page.total_exact
    assert [h.id for h in page.hits] == [1, 2, 3, 4, 5] or len(page.hits) == 5


def test_a_short_ranking_reads_once_and_says_it_is_complete() -> None:
    ranking = Photos({1: (0.9, 5.0), 2: (0.2, 1.0)})
    page = paginate(ranking.fetch, judge, 10, "relevance", 0.5, None, "q")
    assert [h.id for h in page.hits] == [1, 2] and page.next is None
    assert page.total == 1 and page.total_exact and ranking.fetches == [WINDOW]


@pytest.mark.parametrize("order", ["relevance", "date", "-date"])
def test_every_page_is_one_search(order: str) -> None:
    ranking = Photos(rows(3000))
    first = paginate(ranking.fetch, judge, 10, order, 0.5, None, "q")
    assert ranking.fetches == [WINDOW] and len(first.hits) == 10 and first.next
    second = paginate(
        ranking.fetch, judge, 10, order, 0.5, Cursor.decode(first.next, order, "q"), "q"
    )
    assert ranking.fetches == [WINDOW, WINDOW] and len(second.hits) == 10
    assert not {h.id for h in first.hits} & {h.id for h in second.hits}


def test_a_cursor_is_tied_to_its_query_and_order() -> None:
    ranking = Photos(rows(50))
    page = paginate(ranking.fetch, judge, 5, "date", 0.0, None, fingerprint("a dog", None))
    assert page.next
    with pytest.raises(CursorError, match="another query"):
        Cursor.decode(page.next, "date", fingerprint("a cat", None))
    with pytest.raises(CursorError, match="order=date"):
        Cursor.decode(page.next, "-date", fingerprint("a dog", None))
    for bad in ("", "nope", "e30", page.next[:-3]):
        with pytest.raises(CursorError):
            Cursor.decode(bad, "date", fingerprint("a dog", None))


def test_when_relevance_may_rise_down_the_ranking_the_total_reads_the_window() -> None:
    """Per-hit evidence can judge a lower-scored photo relevant: the first hit below the
    threshold then does not end the count, so the total is the same whatever k asked."""
    ranking = Photos({i: (0.99 - i / 1000, float(i)) for i in range(1, 101)})

    def rising(ranking):  # every tenth hit relevant, whatever its rank
        return [0.9 if round((0.99 - s) * 1000) % 10 == 5 else 0.1 for s in ranking.scores]

    totals = {
        k: paginate(ranking.fetch, rising, k, "relevance", 0.5, None, "q", monotone=False).total
        for k in (1, 5, 30)
    }
    assert totals == {1: 10, 5: 10, 30: 10}
    # the window is read whole either way: read as if relevance could not rise, the
    # count is the same
    assert paginate(ranking.fetch, rising, 1, "relevance", 0.5, None, "q").total == 10


@pytest.mark.parametrize("window", [1000, 25])
@pytest.mark.parametrize("k", [1, 3, 7, 40])
def test_with_evidence_relevance_order_serves_every_good_match_before_the_guesses(
    k, window
) -> None:
    """A photo judged relevant below guesses that outscore it (per-hit evidence) comes
    first: the pages read the good matches (those of the window: the first ``window``
    hits) by score, then the others by score, each once, with the same total on every
    page; ties in score (the rows' are rounded) broken by id."""
    ranking = Photos(rows(120, seed=3))

    def rising(ranking):  # relevant whatever the rank: every score with a 5 in its cents
        return [0.9 if round(s * 100) % 10 == 5 else 0.1 for s in ranking.scores]

    seen, cursor, totals = [], None, set()
    while True:
        page = paginate(
            ranking.fetch, rising, k, "relevance", 0.5, cursor, "q", window, monotone=False
        )
        seen += [h.id for h in page.hits]
        totals.add(page.total)
        if page.next is None:
            break
        cursor = Cursor.decode(page.next, "relevance", "q")
    by_score = sorted(ranking.rows, key=lambda i: (-ranking.rows[i][0], i))
    good = [i for i in by_score[:window] if round(ranking.rows[i][0] * 100) % 10 == 5]
    assert 0 < len(good) < len(by_score)
    assert seen == good + [i for i in by_score if i not in good]
    assert totals == {len(good)}
