"""Every photo's filter columns held in memory (numpy, by id), with an index for each
condition: a query takes its rarest condition's rows plus the *tail* read or edited since
the last reindex, and checks every condition on them (``PhotoFilter.masks``)."""

from __future__ import annotations

import math
import sqlite3
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from groundsearch.index.filters.conditions import EARTH_RADIUS_KM, PhotoFilter, floats
from groundsearch.index.store import records

__all__ = ["CELL_DEG", "FilterColumns"]

#: The grid of the ``near`` index: cells of this many degrees of latitude and longitude.
CELL_DEG = 0.01
_LON_CELLS = round(360 / CELL_DEG)
#: Rows read a batch at a time when following the records.
READ_BATCH = 50_000
#: The indexes are rebuilt when the rows read or edited since cover this share of the
#: photos (and at least ``REINDEX_MIN`` rows).
REINDEX_SHARE = 0.02
REINDEX_MIN = 2_000
_ARRAYS = ("ids", "alive", "taken_at", "lat", "lon", "folder", "camera", "uploaded", "xyz")


class _Groups:
    """Row positions grouped by an int code (-1: no value): a group is a slice."""

    def __init__(self, codes: np.ndarray) -> None:
        self.order = np.argsort(codes, kind="stable")
        self.bounds = np.searchsorted(codes[self.order], np.arange(-1, codes.max(initial=-1) + 2))

    def rows(self, codes: Sequence[int]) -> np.ndarray:
        top = self.bounds.size - 2  # codes read after the grouping have no group
        parts = [self.order[self.bounds[c + 1] : self.bounds[c + 2]] for c in codes if 0 <= c < top]
        parts = [p for p in parts if p.size]
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    def size(self, codes: Sequence[int]) -> int:
        top = self.bounds.size - 2
        return int(sum(self.bounds[c + 2] - self.bounds[c + 1] for c in codes if 0 <= c < top))


class _Names:
    """Distinct text values and their codes (in order of first appearance)."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self.code: dict[str, int] = {}
        self._sorted: list[str] | None = None

    def encode(self, value: str | None) -> int:
        if value is None:
            return -1
        found = self.code.get(value)
        if found is None:
            found = self.code[value] = len(self.values)
            self.values.append(value)
            self._sorted = None
        return found

    def under(self, folder: str) -> list[int]:
        """The codes of ``folder`` and of the folders under it."""
        if self._sorted is None:
            self._sorted = sorted(self.values)
        values, under = self._sorted, folder.rstrip("/") + "/"
        lo, hi = bisect_left(values, folder), bisect_left(values, under[:-1] + "0")
        return [self.code[v] for v in values[lo:hi] if v == folder or v.startswith(under)]


class FilterColumns:
    """The filter columns of every photo of a gallery, following its records. Thread-safe."""

    def __init__(self) -> None:
        self.n = 0  # rows in use (removed photos' rows stay, dead)
        self.ids = np.empty(0, np.int64)
        self.alive = np.empty(0, bool)
        self.taken_at = np.empty(0, np.float64)
        self.lat = np.empty(0, np.float64)
        self.lon = np.empty(0, np.float64)
        self.folder = np.empty(0, np.int32)
        self.camera = np.empty(0, np.int32)
        self.uploaded = np.empty(0, bool)
        self.xyz = np.empty((0, 3), np.float64)  # the place on the unit sphere (NaN: none)
        self.folders, self.cameras = _Names(), _Names()
        self.last_id = self.last_removal = self.last_edit = 0
        self.live = 0
        self._indexed = 0  # rows the indexes cover
        self._edited: set[int] = set()  # rows edited since (their index entries stale)
        self._lock = threading.RLock()
        self._reindex()

    def __len__(self) -> int:
        """Live photos."""
        return self.live

    def refresh(self, db: sqlite3.Connection) -> int:
        """Read what the records committed since the last refresh; the rows changed."""
        with self._lock:
            changed = 0
            removals = records.removals_after(db, self.last_removal)
            for _, kind, item in removals:
                if kind == "images":
                    changed += self._kill(item)
            if removals:
                self.last_removal = removals[-1][0]
            edits = records.edits_after(db, self.last_edit)
            if edits:
                self.last_edit = edits[-1][0]
                stale = sorted({item for _, item in edits if item <= self.last_id})
                for start in range(0, len(stale), READ_BATCH):
                    batch = stale[start : start + READ_BATCH]
                    changed += self._rewrite(records.filter_rows(db, batch))
            while rows := records.filter_rows_after(db, self.last_id, READ_BATCH):
                self._append(rows)
                changed += len(rows)
            if (self.n - self._indexed) + len(self._edited) > max(
                REINDEX_MIN, REINDEX_SHARE * self.n
            ):
                self._reindex()
            return changed

    def _row(self, photo_id: int) -> int:
        pos = int(np.searchsorted(self.ids[: self.n], photo_id))
        return pos if pos < self.n and self.ids[pos] == photo_id else -1

    def _kill(self, photo_id: int) -> int:
        row = self._row(photo_id)
        if row < 0 or not self.alive[row]:
            return 0
        self.alive[row] = False
        self.live -= 1
        return 1

    def _decode(self, rows: list[tuple[Any, ...]]) -> dict[str, np.ndarray]:
        cols = list(zip(*rows, strict=True))
        lat, lon = floats(cols[4]), floats(cols[5])
        return {
            "ids": np.array(cols[0], np.int64),
            "taken_at": floats(cols[1]),
            "folder": np.array([self.folders.encode(v) for v in cols[2]], np.int32),
            "camera": np.array([self.cameras.encode(v) for v in cols[3]], np.int32),
            "lat": lat,
            "lon": lon,
            "uploaded": np.array(cols[6], bool),
            "xyz": _unit(lat, lon),
        }

    def _append(self, rows: list[tuple[Any, ...]]) -> None:
        new = self._decode(rows)
        end = self.n + len(rows)
        if end > self.ids.size:
            capacity = max(end, int(self.ids.size * 1.5), 1024)
            for name in _ARRAYS:
                old = getattr(self, name)
                grown = np.zeros((capacity, *old.shape[1:]), old.dtype)
                grown[: self.n] = old[: self.n]
                setattr(self, name, grown)
        for name, values in new.items():
            getattr(self, name)[self.n : end] = values
        self.alive[self.n : end] = True
        self.n, self.live = end, self.live + len(rows)
        self.last_id = int(new["ids"][-1])

    def _rewrite(self, rows: list[tuple[Any, ...]]) -> int:
        if not rows:
            return 0
        new = self._decode(rows)
        at = np.array([self._row(i) for i in new.pop("ids")], np.int64)
        keep = at >= 0
        for name, values in new.items():
            getattr(self, name)[at[keep]] = values[keep]
        self._edited.update(int(r) for r in at[keep] if r < self._indexed)
        return int(keep.sum())

    def _reindex(self) -> None:
        n = self.n
        taken = self.taken_at[:n]
        dated = np.flatnonzero(~np.isnan(taken))
        self._by_date = dated[np.argsort(taken[dated], kind="stable")]
        self._dates = taken[self._by_date]
        self._by_folder = _Groups(self.folder[:n])
        self._by_camera = _Groups(self.camera[:n])
        placed = np.flatnonzero(~np.isnan(self.lat[:n]) & ~np.isnan(self.lon[:n]))
        cells = _cells(self.lat[placed], self.lon[placed])
        order = np.argsort(cells, kind="stable")
        self._by_cell, self._cells = placed[order], cells[order]
        self._uploads = np.flatnonzero(self.uploaded[:n])
        self._indexed, self._edited = n, set()

    def matching(self, where: PhotoFilter) -> np.ndarray:
        """The sorted ids of the live photos that pass ``where`` (all for an empty one)."""
        with self._lock:
            rows = self._candidates(where)
            if rows is None:
                rows = np.arange(self.n)
            return self.ids[np.sort(rows[self._passes(rows, where)])]

    def passing(self, ids: Sequence[int] | np.ndarray, where: PhotoFilter) -> np.ndarray:
        """The sorted ids among ``ids`` of the live photos that pass ``where``."""
        ids = np.unique(np.asarray(ids, np.int64))
        with self._lock:
            pos = np.minimum(np.searchsorted(self.ids[: self.n], ids), max(self.n - 1, 0))
            held = pos < self.n
            if self.n:
                held &= self.ids[pos] == ids
            rows = pos[held]
            return ids[held][self._passes(rows, where)]

    def count(self, where: PhotoFilter | None) -> int:
        """How many live photos pass ``where`` (all of them for None or an empty one)."""
        return self.live if not where else int(self.matching(where).size)

    def _passes(self, rows: np.ndarray, where: PhotoFilter) -> np.ndarray:
        """Which of ``rows`` are alive and pass every condition of ``where``."""
        ok = self.alive[rows]
        if not where:
            return ok
        if where.near is not None:  # on the unit sphere: one inner product a row
            xyz = self.xyz[rows]
            ok &= xyz @ _unit(*where.near) >= math.cos(where.radius_km / EARTH_RADIUS_KM)
        if where.camera is not None:
            ok &= self.camera[rows] == self.cameras.code.get(where.camera.lower(), -2)
        if where.folder is not None:
            table = np.zeros(len(self.folders.values) + 1, bool)  # the last: no folder
            table[self.folders.under(where.folder)] = True
            ok &= table[self.folder[rows]]
        rest = replace(where, near=None, within_km=None, camera=None, folder=None)
        columns = _Lazy(
            {"taken_at": lambda: self.taken_at[rows], "uploaded": lambda: self.uploaded[rows]}
        )
        for mask in rest.masks(columns).values():
            ok &= mask
        return ok

    def _candidates(self, where: PhotoFilter) -> np.ndarray | None:
        """A superset of the rows passing ``where`` (the rarest condition's index, the tail
        and the edited rows); None: every row."""
        options: list[tuple[int, Any]] = []
        if where.after is not None or where.before is not None:
            lo = 0 if where.after is None else int(np.searchsorted(self._dates, where.after))
            hi = self._dates.size
            if where.before is not None:
                hi = int(np.searchsorted(self._dates, where.before))
            options.append((max(hi - lo, 0), lambda: self._by_date[lo : max(hi, lo)]))
        if where.folder is not None:
            codes = self.folders.under(where.folder)
            options.append((self._by_folder.size(codes), lambda: self._by_folder.rows(codes)))
        if where.camera is not None:
            code = self.cameras.code.get(where.camera.lower(), -1)
            options.append((self._by_camera.size([code]), lambda: self._by_camera.rows([code])))
        if where.near is not None:
            ranges = self._cell_ranges(where.near, where.radius_km)
            size = int(sum(hi - lo for lo, hi in ranges))
            options.append((size, lambda: _slices(self._by_cell, ranges)))
        if where.source == "upload":
            options.append((self._uploads.size, lambda: self._uploads))
        if not options:
            return None
        rows = np.asarray(min(options, key=lambda o: o[0])[1](), np.int64)
        if self._indexed == self.n and not self._edited:
            return rows  # (an index lists a row once)
        extra = [np.arange(self._indexed, self.n)]
        if self._edited:
            extra.append(np.fromiter(self._edited, np.int64, len(self._edited)))
        return np.unique(np.concatenate([rows, *extra]))

    def _cell_ranges(self, near: tuple[float, float], km: float) -> list[tuple[int, int]]:
        """Ranges of ``_by_cell`` whose cells cover the circle's bounding box."""
        lat, lon = near
        angle = km / EARTH_RADIUS_KM * (1 + 1e-9) + 1e-12
        dlat = math.degrees(angle)
        lat_lo, lat_hi = max(lat - dlat, -90.0), min(lat + dlat, 90.0)
        if lat - dlat <= -90 or lat + dlat >= 90 or angle >= math.pi / 2:
            spans = [(0, _LON_CELLS - 1)]
        else:
            dlon = math.degrees(math.asin(min(1.0, math.sin(angle) / math.cos(math.radians(lat)))))
            west, east = _lon_cell(lon - dlon), _lon_cell(lon + dlon)
            if lon - dlon < -180 or lon + dlon > 180 or west > east:
                spans = [(west, _LON_CELLS - 1), (0, east)]
            else:
                spans = [(west, east)]
        rows = np.arange(_lat_cell(lat_lo), _lat_cell(lat_hi) + 1, dtype=np.int64)
        out: list[tuple[int, int]] = []
        for first, last in spans:
            lo = np.searchsorted(self._cells, rows * _LON_CELLS + first)
            hi = np.searchsorted(self._cells, rows * _LON_CELLS + last, side="right")
            out += [(int(a), int(b)) for a, b in zip(lo, hi, strict=True) if b > a]
        return out


class _Lazy(Mapping[str, Any]):
    """Columns computed when a condition first reads them."""

    def __init__(self, makers: dict[str, Callable[[], Any]]) -> None:
        self._makers = makers
        self._made: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._made:
            self._made[name] = self._makers[name]()
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


def _unit(lat: Any, lon: Any) -> np.ndarray:
    """Places (degrees) as unit-sphere points, (..., 3), NaN where unknown: two lie within
    ``d`` km when their inner product is at least ``cos(d / EARTH_RADIUS_KM)``."""
    p, q = np.radians(lat), np.radians(lon)
    return np.stack([np.cos(p) * np.cos(q), np.cos(p) * np.sin(q), np.sin(p)], axis=-1)


def _lat_cell(lat: float | np.ndarray) -> Any:
    return np.floor((np.clip(lat, -90.0, 90.0) + 90.0) / CELL_DEG).astype(np.int64)


def _lon_cell(lon: float | np.ndarray) -> Any:
    wrapped = (np.asarray(lon, np.float64) + 180.0) % 360.0
    return np.minimum(np.floor(wrapped / CELL_DEG), _LON_CELLS - 1).astype(np.int64)


def _cells(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    return _lat_cell(lat) * _LON_CELLS + _lon_cell(lon)


def _slices(rows: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    if not ranges:
        return np.empty(0, np.int64)
    return np.concatenate([rows[lo:hi] for lo, hi in ranges])
