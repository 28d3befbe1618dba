"""The ids that pass a filter, planned over the gallery's SQL indexes: what the filtered
search read before ``FilterColumns`` (kept to compare against it, bench/filtered_search.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

import numpy as np

from groundsearch.index.filters.conditions import PhotoFilter
from groundsearch.index.filters.sql import filter_conditions

#: A further condition is looked up in its index and intersected while it matches fewer
#: than this many times the photos still in the running (a lookup costs about a tenth of
#: checking a row); beyond, the rest are checked on those photos' rows.
FETCH_RATIO = 10
#: The order conditions are tried in when nothing is known of their selectivity.
_DEFAULT_ORDER = ("near", "camera", "folder", "date", "source")


def _id_array(text: str | None) -> np.ndarray:
    """The ids of a ``group_concat(id)`` (one string: no Python object per row)."""
    if not text:
        return np.empty(0, np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


def _ids_where(
    db: sqlite3.Connection, f: PhotoFilter, names: Sequence[str], among: np.ndarray | None = None
) -> np.ndarray:
    """The sorted ids of the photos (among ``among``, if given) that meet ``f``'s
    conditions ``names`` (``near``: its box, then the exact distance)."""
    conditions = filter_conditions(f)
    parts = [f"({conditions[n][0]})" for n in names]
    args = [a for n in names for a in conditions[n][1]]
    if among is not None:
        parts.insert(0, "id IN (SELECT value FROM json_each(?))")
        args.insert(0, json.dumps(np.asarray(among).tolist()))
    where = " AND ".join(parts) or "1"
    if "near" not in names:
        text = db.execute(f"SELECT group_concat(id) FROM photos WHERE {where}", args).fetchone()
        return np.sort(_id_array(text[0]))
    rows = db.execute(f"SELECT id, lat, lon FROM photos WHERE {where}", args).fetchall()
    if not rows:
        return np.empty(0, np.int64)
    ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    lat = np.fromiter((r[1] for r in rows), np.float64, len(rows))
    lon = np.fromiter((r[2] for r in rows), np.float64, len(rows))
    return np.sort(ids[f.within(lat, lon)])


def matching_ids(
    db: sqlite3.Connection, f: PhotoFilter, expected: dict[str, float] | None = None
) -> np.ndarray:
    """The sorted ids of every photo that passes ``f`` (ValueError for an empty filter).
    ``expected`` (each condition's estimated count) plans it: the rarest condition's index
    first, further ones intersected while not much commoner (``FETCH_RATIO``), the rest
    checked on the rows."""
    if not f:
        raise ValueError("an empty filter: every photo passes")
    known = expected or {}
    names = sorted(f.conditions, key=lambda n: (known.get(n, np.inf), _DEFAULT_ORDER.index(n)))
    ids = _ids_where(db, f, names[:1])
    for i, name in enumerate(names[1:], start=1):
        if not ids.size:
            break
        if known.get(name, 0.0) > FETCH_RATIO * ids.size:
            return _ids_where(db, f, names[i:], among=ids)
        ids = np.intersect1d(ids, _ids_where(db, f, [name]), assume_unique=True)
    return ids
