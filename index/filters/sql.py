"""The photo filters as SQL over the gallery's records: a keyset listing by date
(``photos_by_date``) and the planner's random sample (``filter_sample``), each on a
connection the caller holds."""

from __future__ import annotations

import sqlite3
from typing import Any, NamedTuple

import numpy as np

from groundsearch.index.filters.conditions import EARTH_RADIUS_KM, Categorical, PhotoFilter, floats
from groundsearch.index.store.records import filter_rows, last_id, random_ids


def filter_conditions(f: PhotoFilter) -> dict[str, tuple[str, list[Any]]]:
    """Each condition of ``f`` as SQL with its parameters, each answered from one index
    (``near``: its circle's bounding box; the caller checks rows)."""
    out: dict[str, tuple[str, list[Any]]] = {}
    bounds = (("taken_at >= ?", f.after), ("taken_at < ?", f.before))
    if dates := [(sql, v) for sql, v in bounds if v is not None]:
        out["date"] = (" AND ".join(sql for sql, _ in dates), [v for _, v in dates])
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
    """SQL for a box a little wider than the circle of ``km`` about ``near``: two ranges
    of longitude over the antimeridian, all of them over a pole."""
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


class DateKey(NamedTuple):
    """Where a photo stands by date: dated photos by ``taken_at``, then undated, by id."""

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
    """The first ``limit`` photos passing ``f`` after the keyset ``after``, by date (ties
    by id; undated last). ``passing`` (about how many pass) decides whether walking the
    date index reads fewer rows than SQLite's own plan."""
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
                kept = f.within(floats([r[2] for r in rows]), floats([r[3] for r in rows]))
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
    """The filter columns of about ``n`` photos drawn at random, with ``id``."""
    rows = filter_rows(db, random_ids(db, "images", n, seed).tolist())
    columns = list(zip(*rows, strict=True)) if rows else [()] * 7
    return {
        "id": np.array(columns[0], np.int64),
        "taken_at": floats(columns[1]),
        "folder": Categorical.of(columns[2]),
        "camera": Categorical.of(columns[3]),
        "lat": floats(columns[4]),
        "lon": floats(columns[5]),
        "uploaded": np.array(columns[6], dtype=bool),
    }
