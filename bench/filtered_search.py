"""Filtered search at 1M photos: latency beside the unfiltered search, and recall@10.

    OMP_NUM_THREADS=1 .venv/bin/python bench/filtered_search.py          # build once, measure
    OMP_NUM_THREADS=1 .venv/bin/python bench/filtered_search.py --search-only

**The gallery.** A real gallery (``Records`` + ``Gallery``) of 1,000,000 photos: the
synthetic vectors of the scale benchmark (bench/scale.py: Flickr8k's real photo and
caption vectors of the shipped model plus noise, same seed) in that model's dimension
(690: the SDT-RNN's 640 and its open-vocabulary channel's 50), inserted through
``records.insert_photo`` with their metadata, then opened as ``Gallery.open`` does: the
``auto`` kind at 1M is ``hnsw`` (``choose_kind``), built from the records and snapshotted.
**The metadata** (seeded, ``metadata``): 3,000 event folders whose sizes are Zipf
(exponent 0.8: the largest holds ~3 % of the photos, the median ~170) under
``/photos/<year>/<date> event <n>``; each event has a day over 10 years (2015–2024),
later years likelier (weight 1.25 a year: 2024 holds ~7× the photos of 2015), and its
photos spread over hours to days after its start (a burst); one main camera per event
(85 % of its photos, the rest any camera; 4 % without a camera), cameras Zipf
(exponent 1) over 40 models; 60 % of the events have GPS (95 % of their photos), around
one of 8 places (a home city takes 45 %, then trips), an event centre within a few km of
the place and its photos within ~300 m of it; 2 % of the photos are uploads (no folder).
Photo ids follow the events' dates (a library indexed folder by folder). The vectors
are independent of the metadata: the photos that pass a filter are a random subset of
the gallery as far as the query is concerned.
**The filters** are picked on the drawn metadata to pass about 0.1 % (one event folder),
1 % (``near`` Paris with the radius that takes 1 %), 10 % (the camera model nearest 10 %)
and 50 % (``after`` the median date) of the photos, plus a combined one (a year and the
most common camera); their shares are measured (SQL count, checked against the drawn
metadata). A sweep of date windows from 0.1 % to 50 % times each plan (exact, selector,
overfetch), forced, to show the crossovers behind ``filtered_search``'s constants.
**Exact answers**: the top 10 of each query among the photos passing each filter,
streamed over the synthetic vectors regenerated from the seed and the drawn metadata
(numpy, not the gallery's code).
**Queries**: the scale benchmark's 300 real Flickr8k test captions.

Method: a fresh process opens the gallery read-only as a replica does (the HNSW snapshot
loaded), one FAISS thread; for each filter one untimed pass over the queries, then a
timed one: ``Gallery.rank_images(query, 10, where)`` per query (batch 1, the hits'
records read too), each right after ``Gallery.rank_images(query, 10)`` of the same
query, timed too: the ratio compares the two taken side by side (the machine is
shared). The sweep forces each plan on the first 40 queries (10 untimed first).
Output: ``runs/bench/filtered_search.json`` and markdown tables.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import scale
import sql_ids

from common import latency, peak_rss_mb, percentile
from groundsearch.index.filters import filtered_search
from groundsearch.index.filters.conditions import PhotoFilter
from groundsearch.index.gallery import Gallery
from groundsearch.index.store import records
from groundsearch.index.store.photo_metadata import PhotoMetadata
from groundsearch.index.store.records import DB_FILE, Records

N = 1_000_000
K = 10
SEED = 26
IDENTITY = {"bench": "filtered-search"}
DAY = 86_400.0
START = datetime(2015, 1, 1, tzinfo=UTC).timestamp()
EVENTS = 3000
CAMERAS = [
    "Apple iPhone 13", "Apple iPhone 12", "Samsung SM-G991B", "Apple iPhone 11",
    "Google Pixel 7", "Apple iPhone XR", "Samsung SM-A525F", "Canon EOS 5D Mark IV",
    "Apple iPhone 8", "Xiaomi Redmi Note 8 Pro", "Sony ILCE-7M3", "Google Pixel 4a",
    "Huawei P30", "Nikon D750", "Apple iPhone SE", "FUJIFILM X-T3", "OnePlus 8T",
    "Canon EOS 80D", "Samsung SM-G973F", "Apple iPhone 14 Pro", "Olympus E-M10",
    "Panasonic DMC-GX80", "Nikon Z 6", "Sony DSC-RX100M3", "Apple iPad Air",
    "Motorola moto g(7)", "Canon PowerShot G7 X", "GoPro HERO8 Black", "DJI FC3170",
    "Xiaomi Mi 9", "Samsung SM-N960F", "Huawei Mate 20", "Nokia 7.2", "LG-H870",
    "FUJIFILM X100V", "Ricoh GR III", "Leica Q2", "Sony ILCE-6400", "Canon EOS R6",
    "Apple iPhone 6s",
]  # fmt: skip
#: (name, latitude, longitude, share of the GPS events, spread of its events in km)
PLACES = [
    ("Lyon", 45.7640, 4.8357, 0.45, 8.0),
    ("Paris", 48.8566, 2.3522, 0.15, 6.0),
    ("Grenoble", 45.1885, 5.7245, 0.10, 5.0),
    ("Barcelona", 41.3874, 2.1686, 0.08, 4.0),
    ("Chamonix", 45.9237, 6.8694, 0.06, 3.0),
    ("New York", 40.7128, -74.0060, 0.06, 5.0),
    ("Tokyo", 35.6762, 139.6503, 0.05, 6.0),
    ("Reykjavik", 64.1466, -21.9426, 0.05, 10.0),
]
TARGETS = (0.001, 0.01, 0.1, 0.5)
SWEEP = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
SWEEP_QUERIES = 40


# --- the metadata ---------------------------------------------------------------------------


def metadata(n: int) -> dict[str, np.ndarray]:
    """Every photo's drawn metadata, in id order (see the module)."""
    rng = np.random.default_rng(SEED)
    sizes = rng.multinomial(n, (w := np.arange(1, EVENTS + 1) ** -0.8) / w.sum())
    rng.shuffle(sizes)
    years = rng.choice(10, size=EVENTS, p=(y := 1.25 ** np.arange(10)) / y.sum())
    starts = START + (years * 365.25 + rng.uniform(0, 365, EVENTS)) * DAY
    starts += rng.uniform(8, 20, EVENTS) * 3600
    order = np.argsort(starts)  # ids follow the events' dates
    sizes, starts = sizes[order], starts[order]
    spread = np.minimum(7 * DAY, 2 * 3600 + sizes * 180.0)  # bigger events last longer
    p_cam = (c := 1.0 / np.arange(1, len(CAMERAS) + 1)) / c.sum()
    main_camera = rng.choice(len(CAMERAS), size=EVENTS, p=p_cam)
    has_gps = rng.random(EVENTS) < 0.6
    place = rng.choice(len(PLACES), size=EVENTS, p=[p[3] for p in PLACES])
    km_lat = 1 / 111.2
    centre_lat = np.array([PLACES[p][1] for p in place])
    centre_lon = np.array([PLACES[p][2] for p in place])
    spread_km = np.array([PLACES[p][4] for p in place])
    centre_lat += rng.normal(size=EVENTS) * spread_km * km_lat
    centre_lon += rng.normal(size=EVENTS) * spread_km * km_lat / np.cos(np.radians(centre_lat))

    event = np.repeat(np.arange(EVENTS), sizes)
    taken_at = starts[event] + rng.exponential(spread[event] / 3)
    camera = np.where(
        rng.random(n) < 0.85, main_camera[event], rng.choice(len(CAMERAS), size=n, p=p_cam)
    )
    camera = np.where(rng.random(n) < 0.04, -1, camera)
    gps = has_gps[event] & (rng.random(n) < 0.95)
    lat = np.where(gps, centre_lat[event] + rng.normal(size=n) * 0.3 * km_lat, np.nan)
    lon = np.where(
        gps,
        centre_lon[event] + rng.normal(size=n) * 0.3 * km_lat / np.cos(np.radians(lat)),
        np.nan,
    )
    uploaded = rng.random(n) < 0.02
    days = [datetime.fromtimestamp(s, UTC) for s in starts]
    folders = np.array([f"/photos/{d.year}/{d:%Y-%m-%d} event {e}" for e, d in enumerate(days)])
    return {
        "event": event,
        "taken_at": taken_at,
        "camera": camera,
        "lat": lat,
        "lon": lon,
        "uploaded": uploaded,
        "folders": folders,
    }


def haversine(lat0: float, lon0: float, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    p0, p = math.radians(lat0), np.radians(lat)
    h = (
        np.sin((p - p0) / 2) ** 2
        + math.cos(p0) * np.cos(p) * np.sin((np.radians(lon) - math.radians(lon0)) / 2) ** 2
    )
    return 2 * 6371.0088 * np.arcsin(np.sqrt(h))


def choose_filters(m: dict[str, np.ndarray]) -> dict[str, tuple[dict[str, Any], np.ndarray]]:
    """name → (PhotoFilter arguments, the drawn photos that pass): see the module."""
    n = len(m["taken_at"])
    indexed = ~m["uploaded"]
    out: dict[str, tuple[dict[str, Any], np.ndarray]] = {}
    counts = np.bincount(m["event"][indexed], minlength=EVENTS)
    event = int(np.argmin(np.abs(counts - TARGETS[0] * n)))
    out["0.1% folder"] = (
        {"folder": str(m["folders"][event])},
        indexed & (m["event"] == event),
    )
    paris = PLACES[1][1:3]
    km = haversine(*paris, m["lat"], m["lon"])  # NaN without GPS
    radius = float(np.sort(km[~np.isnan(km)])[int(TARGETS[1] * n)])
    radius = round(radius, 2)
    out["1% near"] = (
        {"near": paris, "within_km": radius},
        ~np.isnan(km) & (km <= radius),
    )
    shares = np.bincount(m["camera"][m["camera"] >= 0], minlength=len(CAMERAS)) / n
    cam = int(np.argmin(np.abs(shares - TARGETS[2])))
    out["10% camera"] = ({"camera": CAMERAS[cam].upper()}, m["camera"] == cam)
    after = float(np.floor(np.median(m["taken_at"]) / DAY) * DAY)
    out["50% after"] = ({"after": after}, m["taken_at"] >= after)
    year = (
        datetime(2019, 1, 1, tzinfo=UTC).timestamp(),
        datetime(2020, 1, 1, tzinfo=UTC).timestamp(),
    )
    top = int(np.argmax(shares))
    out["date+camera"] = (
        {"after": year[0], "before": year[1], "camera": CAMERAS[top]},
        (m["taken_at"] >= year[0]) & (m["taken_at"] < year[1]) & (m["camera"] == top),
    )
    rng = np.random.default_rng(SEED + 1)
    taken = np.sort(m["taken_at"])
    for share in SWEEP:
        lo = int(rng.integers(0, n - int(share * n)))
        a, b = float(taken[lo]), float(taken[lo + int(share * n)])
        out[f"sweep {share:g}"] = (
            {"after": a, "before": b},
            (m["taken_at"] >= a) & (m["taken_at"] < b),
        )
    return out


def load_base(gallery: Path) -> tuple[np.ndarray, np.ndarray]:
    """The scale benchmark's real vectors and queries, in the dimension of the model that
    made them (the shipped one's, with its open-vocabulary channel: 690), scaled to unit
    length: its vectors are not (norm ~1.2), and the scale benchmark's noise (the median
    distance to the nearest neighbour, ``scale.noise_scale``) assumes unit vectors — on
    the raw ones it comes out 0, and every synthetic vector would repeat exactly."""
    db = sqlite3.connect(f"file:{gallery / DB_FILE}?mode=ro", uri=True)
    scale.DIM = int(
        json.loads(db.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()[0])
    )
    db.close()
    base, queries = scale.load_base(gallery)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return base, queries


# --- building ---------------------------------------------------------------------------------


def build(args: argparse.Namespace) -> dict[str, Any]:
    """Insert the photos into a new gallery's records, build its index as ``Gallery.open``
    does, snapshot it, and stream the exact filtered answers."""
    base, queries = load_base(args.base)
    tau = scale.noise_scale(base)
    assert tau > 0.1, f"noise scale {tau}: the synthetic vectors would be copies"
    m = metadata(args.size)
    filters = choose_filters(m)
    folder = args.work / "gallery"
    folder.mkdir(parents=True)
    store = Records.create(folder / DB_FILE, scale.DIM, "auto", IDENTITY)  # as load_base set
    t0 = time.perf_counter()
    names = m["folders"]
    empty = (np.full((len(queries), K), -np.inf, np.float32), np.zeros((len(queries), K), np.int64))
    top = dict.fromkeys(["unfiltered", *filters], empty)
    for ids, x in scale.synthetic_chunks(base, args.size, tau):
        rows = np.asarray(ids) - 1
        with store.transaction() as db:
            for j, v in zip(rows.tolist(), x, strict=True):
                uploaded = bool(m["uploaded"][j])
                path = (
                    f"uploads/{j:08x}.jpg"
                    if uploaded
                    else f"{names[m['event'][j]]}/IMG_{j:07d}.jpg"
                )
                cam = int(m["camera"][j])
                gps = not np.isnan(m["lat"][j])
                meta = PhotoMetadata(
                    taken_at=float(m["taken_at"][j]),
                    taken_source="exif",
                    camera=CAMERAS[cam] if cam >= 0 else None,
                    lat=float(m["lat"][j]) if gps else None,
                    lon=float(m["lon"][j]) if gps else None,
                    width=4032,
                    height=3024,
                )
                records.insert_photo(db, f"{j:064x}", path, v, uploaded, meta)
        s = queries @ x.T
        for name in top:
            mask = np.ones(len(rows), bool) if name == "unfiltered" else filters[name][1][rows]
            if not mask.any():
                continue
            cand_s, cand_i = s[:, mask], np.asarray(ids)[mask]
            kk = min(K, cand_i.size)
            part = np.argpartition(-cand_s, kk - 1, axis=1)[:, :kk]
            best_s, best_i = top[name]
            all_s = np.concatenate([best_s, np.take_along_axis(cand_s, part, 1)], axis=1)
            all_i = np.concatenate([best_i, cand_i[part]], axis=1)
            order = np.argsort(-all_s, axis=1, kind="stable")[:, :K]
            top[name] = (np.take_along_axis(all_s, order, 1), np.take_along_axis(all_i, order, 1))
        print(f"  {ids[-1]:,} photos inserted", file=sys.stderr, flush=True)
    store.close()
    insert_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    gallery = Gallery.open(folder, IDENTITY)  # no snapshot: built from the records
    built = gallery.indexes.describe()["images"]
    gallery.close()  # snapshots
    index_s = time.perf_counter() - t0
    np.save(args.work / "queries.npy", queries)
    np.savez(args.work / "exact.npz", **{n: top[n][1] for n in top})
    doc = {n: {"where": f[0], "drawn": int(f[1].sum())} for n, f in filters.items()}
    (args.work / "filters.json").write_text(json.dumps(doc, indent=1))
    return {
        "photos": args.size,
        "insert_s": round(insert_s, 1),
        "index_build_s": round(index_s, 1),
        "index": built,
        "records_mb": round((folder / DB_FILE).stat().st_size / 2**20),
        "noise_tau": round(tau, 4),
        "build_peak_mb": round(peak_rss_mb()),
    }


# --- measuring --------------------------------------------------------------------------------


def timed(fn, queries: np.ndarray, warm: int | None = None) -> tuple[np.ndarray, list[list[int]]]:
    for q in queries[:warm]:  # untimed: a server that has answered a while
        fn(q)
    times, found = [], []
    for q in queries:
        t = time.perf_counter()
        hits = fn(q)
        times.append(time.perf_counter() - t)
        found.append(hits)
    return np.array(times) * 1000, found


def paired(fn, plain, queries: np.ndarray) -> tuple[np.ndarray, list[list[int]], np.ndarray]:
    """``timed(fn)``, each query's time taken right after the unfiltered search of the
    same query (``plain``), so both see the same load on a shared machine."""
    for q in queries:
        fn(q)
    times, found, plain_times = [], [], []
    for q in queries:
        t = time.perf_counter()
        plain(q)
        t1 = time.perf_counter()
        hits = fn(q)
        plain_times.append(t1 - t)
        times.append(time.perf_counter() - t1)
        found.append(hits)
    return np.array(times) * 1000, found, np.array(plain_times) * 1000


def summary(ms: np.ndarray, found: list[list[int]], exact: np.ndarray, passing: int) -> dict:
    recall = [
        len(set(f) & set(e[e > 0].tolist())) / max(1, min(K, passing))
        for f, e in zip(found, exact, strict=True)
    ]
    return {
        **latency(ms, digits=3),
        "recall10": round(float(np.mean(recall)), 4),
        "hits_ok": all(len(f) == min(K, passing) for f in found),
    }


def search(args: argparse.Namespace) -> dict[str, Any]:
    faiss.omp_set_num_threads(1)
    queries = np.load(args.work / "queries.npy")
    exact = np.load(args.work / "exact.npz")
    chosen = json.loads((args.work / "filters.json").read_text())
    load = os.getloadavg()
    t0 = time.perf_counter()
    gallery = Gallery.open(args.work / "gallery", IDENTITY, read_only=True)
    load_s = time.perf_counter() - t0
    index = gallery.indexes["images"]
    db = gallery.records.reader()

    def ids_of(where: PhotoFilter | None):
        def search(q: np.ndarray) -> list[int]:
            ids = gallery.rank_images(q, K, where).ids.tolist()
            found = gallery.image_records(ids)  # the hits' records, as a page reads them
            return [i for i in ids if i in found]

        return search

    ms, found = timed(ids_of(None), queries)
    out: dict[str, Any] = {
        "index": index.describe(),
        "load_s": round(load_s, 1),
        "unfiltered": summary(ms, found, exact["unfiltered"], len(index)),
        "filters": {},
        "sweep": {},
    }
    print(f"  unfiltered {out['unfiltered']}", file=sys.stderr, flush=True)
    for name, spec in chosen.items():
        kwargs = dict(spec["where"])
        if "near" in kwargs:
            kwargs["near"] = tuple(kwargs["near"])
        where = PhotoFilter(**kwargs)
        passing = gallery.count_images(where)
        assert passing == spec["drawn"], (name, passing, spec["drawn"])  # = the drawn truth
        share, expected = gallery.filtered.estimate(where)
        row: dict[str, Any] = {
            "where": spec["where"],
            "passing": passing,
            "share": round(passing / len(index), 5),
            "estimated_share": round(share, 5),
            "plan": gallery.filtered.plan(index, share, K, expected),
        }
        columns = gallery.filtered.current()
        assert columns.matching(where).tolist() == sql_ids.matching_ids(db, where).tolist()
        for key, ids in (
            ("ids_ms", lambda c=columns, w=where: c.matching(w)),  # what the exact plan reads
            ("sql_ids_ms", lambda w=where, e=expected: sql_ids.matching_ids(db, w, e)),  # SQLite
        ):
            t = []
            for _ in range(20):
                t1 = time.perf_counter()
                ids()
                t.append(time.perf_counter() - t1)
            row[key] = round(float(np.median(t)) * 1000, 3)
        t = []
        for _ in range(20):
            t1 = time.perf_counter()
            gallery.filtered.estimate(where)
            t.append(time.perf_counter() - t1)
        row["estimate_ms"] = round(float(np.median(t)) * 1000, 3)
        if name.startswith("sweep"):
            sub = queries[:SWEEP_QUERIES]
            for plan in filtered_search.PLANS:

                def fn(q, where=where, plan=plan):
                    return [i for i, _ in gallery.filtered.search(q, K, where, plan)]

                ms, found = timed(fn, sub, warm=10)
                row[plan] = summary(ms, found, exact[name][:SWEEP_QUERIES], passing)
            out["sweep"][name] = row
        else:
            ms, found, plain = paired(ids_of(where), ids_of(None), queries)
            row.update(summary(ms, found, exact[name], passing))
            row["unfiltered_p50_ms"] = percentile(plain, 50, digits=3)
            row["ratio_p50"] = round(row["p50_ms"] / row["unfiltered_p50_ms"], 2)
            out["filters"][name] = row
        print(f"  {name}: {row}", file=sys.stderr, flush=True)
    gallery.close(snapshot=False)
    out["load_before"] = [round(x, 2) for x in load]
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    out["search_peak_mb"] = round(peak_rss_mb())
    return out


def child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, "--work", str(args.work)]
    cmd += ["--base", str(args.base), "--size", str(args.size)]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", type=Path, default=Path("runs/scale/flickr8k-all"))
    p.add_argument("--work", type=Path, default=Path("runs/filtered/work"))
    p.add_argument("--size", type=int, default=N)
    p.add_argument("--out", type=Path, default=Path("runs/bench/filtered_search.json"))
    p.add_argument("--search-only", action="store_true", help="measure the gallery --work holds")
    p.add_argument("--build-only", action="store_true", help="build the gallery, measure later")
    p.add_argument("--child", choices=["build", "search"])
    args = p.parse_args()
    if args.child:
        print(json.dumps(build(args) if args.child == "build" else search(args)))
        return
    result = json.loads(args.out.read_text()) if args.out.exists() else {}
    if not args.search_only:
        if args.work.exists():
            sys.exit(f"{args.work} exists: remove it, or measure it with --search-only")
        args.work.mkdir(parents=True)
        t0 = time.perf_counter()
        result["build"] = child("build", args)
        result["build"]["total_s"] = round(time.perf_counter() - t0, 1)
        print(f"built {result['build']}", file=sys.stderr, flush=True)
        if args.build_only:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1))
            return
    t0 = time.perf_counter()
    result["search"] = child("search", args)
    result["search"]["total_s"] = round(time.perf_counter() - t0, 1)
    result["threads"] = os.environ.get("OMP_NUM_THREADS", "unset")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(tables(result))


def tables(result: dict[str, Any]) -> str:
    s = result["search"]
    u = s["unfiltered"]
    lines = [
        "| filter | passing (share) | estimated share | plan | ids ms (SQL) | p50 ms | p99 ms "
        "| p50 / unfiltered | recall@10 | k hits |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| none | {result['build']['photos']:,} (100 %) | – | – | – | {u['p50_ms']} "
        f"| {u['p99_ms']} | 1.0 "
        f"| {u['recall10']} | {u['hits_ok']} |",
    ]
    for name, r in s["filters"].items():
        lines.append(
            f"| {name}: `{json.dumps(r['where'])}` | {r['passing']:,} ({100 * r['share']:.3g} %) "
            f"| {100 * r['estimated_share']:.3g} % | {r['plan']} "
            f"| {r['ids_ms']} ({r['sql_ids_ms']}) | {r['p50_ms']} "
            f"| {r['p99_ms']} | {r['ratio_p50']} (unfiltered {r['unfiltered_p50_ms']}) "
            f"| {r['recall10']} | {r['hits_ok']} |"
        )
    lines += [
        "",
        "| date window passing | chosen plan | ids ms (SQL) | exact p50 / recall "
        "| selector p50 / recall "
        "| overfetch p50 / recall |",
        "|---|---|---|---|---|---|",
    ]
    for r in s["sweep"].values():
        cells = [f"{r[p]['p50_ms']} / {r[p]['recall10']}" for p in filtered_search.PLANS]
        lines.append(
            f"| {r['passing']:,} ({100 * r['share']:.3g} %) | {r['plan']} "
            f"| {r['ids_ms']} ({r['sql_ids_ms']}) | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
