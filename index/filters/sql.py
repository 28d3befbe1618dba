"""The photo filters as SQL over the gallery's records: the ids that pass a filter
(``matching_ids``), a keyset listing by date (``photos_by_date``) and the planner's
random sample (``filter_sample``), each on a connection the caller holds."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from groundsearch.index.filters.conditions import EARTH_RADIUS_KM, Categorical, PhotoFilter
from groundsearch.index.store.records import FILTER_COLUMNS, last_id

#: A further condition is looked up in its index and intersected while it matches fewer
#: than this many times the photos still in the running (a lookup costs about a tenth of
#: checking a row); beyond, the rest are checked on those photos' rows.
FETCH_RATIO = 10
#: The order conditions are tried in when nothing is known of their selectivity.
_DEFAULT_ORDER = ("near", "camera", "folder", "date", "source")


def filter_conditions(f: PhotoFilter) -> dict[str, tuple[str, list[Any]]]:
    """Each condition of ``f`` as SQL over ``photos`` with its parameters, each answered
    from one index; ``near`` is its circle's bounding box (``matching_ids`` checks rows)."""
    out: dict[str, tuple[str, list[Any]]] = {}
    if f.after is not None or f.before is not None:
        parts: list[str] = []
        args: list[Any] = []
        if f.after is not None:
            parts, args = [*parts, "taken_at >= ?"], [*args, f.after]
        if f.before is not None:
            parts, args = [*parts, "taken_at < ?"], [*args, f.before]
        out["date"] = (" AND ".join(parts), args)
    if f.folder is not None:
        # the folder or a folder under it: a range of the index ("/a/b" ≤ folder < "/a/b0",
        # "0" the character after "/"), then path components ("/a/b-c" is in the range)
        under = f.folder.rstrip("/") + "/"
        out["folder"] = (
            "folder >= ? AND folder < ? AND (folder = ? OR substr(folder, 1, ?) = ?)",
            [f.folder, under[:-1] + "0", f.folder, len(under), under],
        )
    if f.camera is not None:
        out["camera"] = ("camera = ? COLLATE NOCASE", [f.camera])
    if f.near is not None:
        out["near"] = _bounding_box(f.near, f.radius_km)
    if f.source is not None:
        out["source"] = ("uploaded = ?", [1 if f.source == "upload" else 0])
    return out


def _bounding_box(near: tuple[float, float], km: float) -> tuple[str, list[Any]]:
    """SQL for the latitude/longitude box around the circle of ``km`` about ``near``,
    a little wider than the circle (the exact check follows); a box over the
    antimeridian is two ranges of longitude, one over a pole all of them."""
    lat, lon = near
    angle = km / EARTH_RADIUS_KM * (1 + 1e-9) + 1e-12  # radians, widened for rounding
    dlat = np.degrees(angle)
    lo, hi = lat - dlat, lat + dlat
    if lo <= -90 or hi >= 90 or angle >= np.pi / 2:
        return "lat BETWEEN ? AND ? AND lon IS NOT NULL", [max(lo, -90.0), min(hi, 90.0)]
    dlon = float(np.degrees(np.arcsin(np.sin(angle) / np.cos(np.radians(lat)))))
    west, east = lon - dlon, lon + dlon
    if west < -180:
        lons, args = "(lon >= ? OR lon <= ?)", [west + 360, east]
    elif east > 180:
        lons, args = "(lon >= ? OR lon <= ?)", [west, east - 360]
    else:
        lons, args = "lon BETWEEN ? AND ?", [west, east]
    return f"lat BETWEEN ? AND ? AND {lons}", [lo, hi, *args]


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


class DateKey(NamedTuple):
    """Where a photo stands in a listing by date (``photos_by_date``): ``dated`` photos
    first by ``taken_at``, the undated after them, each part by ``id``."""

    dated: bool
    taken_at: float
    id: int


def photos_by_date(
    db: sqlite3.Connection,
    f: PhotoFilter | None,
    limit: int,
    newest_first: bool = True,
    after: DateKey | None = None,
    passing: int | None = None,
) -> list[DateKey]:
    """The first ``limit`` photos that pass ``f`` (None: all) after the keyset ``after`` in
    date order (ties by id; undated last). ``passing`` (about how many pass) decides
    whether walking the date index reads fewer rows than SQLite's own plan."""
    conditions = filter_conditions(f) if f else {}
    walk = (
        bool(conditions)
        and passing is not None
        and passing**2 >= limit * max(last_id(db, "images"), 1)
    )
    table = "photos INDEXED BY photos_taken" if walk else "photos"
    where = [f"({sql})" for sql, _ in conditions.values()]
    where_args = [a for _, args in conditions.values() for a in args]
    near = f is not None and f.near is not None
    direction, beyond, behind = ("DESC", "<", ">=") if newest_first else ("ASC", ">", "<=")
    out: list[DateKey] = []
    key = after
    for dated in (True, False):
        if key is not None and key.dated != dated:
            continue  # the cursor is past this part (undated after dated)
        while len(out) < limit:
            if dated:
                bound = "taken_at IS NOT NULL"
                args: list[Any] = []
                if key is not None:
                    # taken_at beyond the key's, or the same and the id beyond
                    bound = f"taken_at {beyond}= ? AND NOT (taken_at = ? AND id {behind} ?)"
                    args = [key.taken_at, key.taken_at, key.id]
                order = f"taken_at {direction}, id {direction}"
            else:
                bound, args = "taken_at IS NULL", []
                if key is not None:
                    bound, args = f"taken_at IS NULL AND id {beyond} ?", [key.id]
                order = f"id {direction}"
            batch = limit - len(out) if not near else max(2 * (limit - len(out)), 64)
            sql = (
                f"SELECT id, taken_at, lat, lon FROM {table} "
                f"WHERE {' AND '.join([bound, *where])} ORDER BY {order} LIMIT ?"
            )
            rows = db.execute(sql, [*args, *where_args, batch]).fetchall()
            if near and rows:
                assert f is not None
                lat = np.array([np.nan if r[2] is None else r[2] for r in rows], np.float64)
                lon = np.array([np.nan if r[3] is None else r[3] for r in rows], np.float64)
                kept = f.within(lat, lon)
            else:
                kept = np.ones(len(rows), bool)
            for row, ok in zip(rows, kept, strict=True):
                if ok and len(out) < limit:
                    out.append(DateKey(dated, float(row[1]) if dated else 0.0, int(row[0])))
            if rows:
                last = rows[-1]
                key = DateKey(dated, float(last[1]) if dated else 0.0, int(last[0]))
            if len(rows) < batch:
                break  # this part is read to its end
        if len(out) >= limit:
            break
        key = None
    return out


def filter_sample(db: sqlite3.Connection, n: int, seed: int = 0) -> dict[str, Any]:
    """The filter columns of about ``n`` photos drawn at random (by id: no table scan),
    as ``PhotoFilter.masks`` reads them, with ``id``."""
    top = last_id(db, "images")
    ids = np.empty(0, np.int64)
    if top > 0 and n > 0:
        ids = np.sort(np.random.default_rng(seed).choice(top, size=min(n, top), replace=False) + 1)
    rows = db.execute(
        f"SELECT {FILTER_COLUMNS} FROM photos WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(ids.tolist()),),
    ).fetchall()
    columns = list(zip(*rows, strict=True)) if rows else [()] * 7

    def floats(values: Sequence[Any]) -> np.ndarray:
        return np.array([np.nan if v is None else v for v in values], np.float64)

    return {
        "id": np.array(columns[0], np.int64),
        "taken_at": floats(columns[1]),
        "folder": Categorical.of(columns[2]),
        "camera": Categorical.of(columns[3]),
        "lat": floats(columns[4]),
        "lon": floats(columns[5]),
        "uploaded": np.array(columns[6], dtype=bool),
    }
