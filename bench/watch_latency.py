"""Folders that stay indexed: seconds from a photo landing in a watched folder to it being
searchable, beside one photo's CNN time measured in the same run (issue 27, item 2).

    python bench/watch_latency.py [--photos 40] [--burst 1000] [--modes serve index]
                                  [--json runs/watch/latency.json]

1. **CNN time.** In this process, before any server starts: the backbone on each of
   ``--photos`` Flickr8k test photos, one at a time, one torch thread (what a watcher's
   CNN worker runs: ``PhotoBatchEmbedder``), decode and CNN timed apart; the median.
2. **Latency, ``serve`` mode** (the one-container case): ``groundsearch serve --watch W``
   on an empty gallery; each photo is copied beside ``W`` under a hidden name and renamed
   into it (it lands whole, at one instant), then ``POST /search`` is polled every 25 ms
   until the photo's file is among the hits (the gallery stays under ``k`` = 100 photos,
   so every photo is a hit: searchable = listed). One photo at a time, 0.5 to 1.5 ×
   ``--gap`` seconds apart (each its own batch of changes, at no fixed phase of the
   replica's follower); one landing first, not counted, warms up.
3. **Latency, ``index`` mode** (two processes): ``groundsearch index W --watch`` writes,
   a read-only replica (``GROUNDSEARCH_READ_ONLY=true groundsearch serve``) answers the
   searches: it sees the commit within its follower's second.
4. **A burst** (``serve`` mode, ``--burst`` > 0): that many Flickr8k training photos
   renamed into the folder at once; the seconds until the first and the last are
   searchable (``/ready``'s ``images``: the search index's size), photos/s.

Target: p50 ≤ 2 × (CNN time + 1 s). The load average before and after is printed: the
benchmark shares the machine's cores with whatever else runs. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from groundsearch.cli.common import json_text
from groundsearch.common.settings import get_settings

sys.path.insert(0, str(Path(__file__).parent))
from common import free_port, machine, percentile

READY_S = 300.0
POLL_S = 0.025
QUERY = "a photo"


def flickr(split: str, n: int, start: int = 0) -> list[Path]:
    root = get_settings().flickr8k_dir
    names = (root / f"Flickr_8k.{split}Images.txt").read_text().split()[start : start + n]
    return [root / "Images" / name for name in names]


def cnn_times(photos: list[Path]) -> dict[str, float]:
    """Decode and CNN seconds per photo, one at a time, one torch thread (medians)."""
    import torch

    from groundsearch.model.runtime.checkpoints import load_checkpoint
    from groundsearch.model.runtime.images.features import FeatureExtractor
    from groundsearch.model.runtime.images.photos import MAX_PIXELS, decode_photo
    from groundsearch.model.runtime.parsing import Parser

    s = get_settings()
    torch.set_num_threads(1)
    model = load_checkpoint(s.default_checkpoint, parser=Parser(s.parser_dir, s.cache_dir).version)
    extractor = FeatureExtractor.for_identity(model.backbone)
    decode, cnn = [], []
    for i, photo in enumerate([photos[0], *photos]):  # the first, twice: a warm-up
        t0 = time.perf_counter()
        img, _ = decode_photo(photo, MAX_PIXELS, min_side=extractor.spec.resize)
        t1 = time.perf_counter()
        extractor.embed_images([img])
        t2 = time.perf_counter()
        if i:
            decode.append(t1 - t0)
            cnn.append(t2 - t1)
    return {
        "backbone": model.backbone,
        "cnn_s": statistics.median(cnn),
        "cnn_p90_s": percentile(cnn, 90, nearest=True),
        "decode_s": statistics.median(decode),
    }


class Process:
    """A ``groundsearch`` subprocess with its log."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = open(log, "a")  # noqa: SIM115 (closed in stop)
        cmd = [sys.executable, "-m", "groundsearch.cli", *args]
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def wait_ready(base: str, proc: Process) -> dict[str, Any]:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.proc.poll() is not None:
            raise SystemExit(f"the server exited: see {proc.log.name}")
        try:
            res = httpx.get(base + "/ready", timeout=5)
            if res.status_code == 200:
                return dict(res.json())
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise SystemExit(f"the server was not ready in {READY_S:.0f} s: see {proc.log.name}")


def hit_files(client: httpx.Client, base: str) -> set[str]:
    res = client.post(base + "/search", params={"text": QUERY, "k": 100})
    res.raise_for_status()
    body = res.json()
    return {hit["file"] for hit in body["results"] + body["weak"]}


def land(photo: Path, folder: Path, name: str) -> float:
    """Copy ``photo`` beside ``folder`` (hidden), rename it in: the instant it landed."""
    hidden = folder / f".{name}.part"
    shutil.copyfile(photo, hidden)
    os.replace(hidden, folder / name)
    return time.perf_counter()


def searchable_after(client: httpx.Client, base: str, name: str, landed: float) -> float:
    deadline = landed + 120
    while time.perf_counter() < deadline:
        if name in hit_files(client, base):
            return time.perf_counter() - landed
        time.sleep(POLL_S)
    raise SystemExit(f"{name} was not searchable within 120 s")


def latencies(base: str, folder: Path, photos: list[Path], gap: float) -> list[float]:
    out = []
    rng = random.Random(27)  # gaps drawn around ``gap``: no landing in step with a follower
    with httpx.Client(timeout=30) as client:
        warm = land(flickr("dev", 1)[0], folder, "warm-up.jpg")  # content of its own
        searchable_after(client, base, "warm-up.jpg", warm)
        for i, photo in enumerate(photos):
            time.sleep(gap * rng.uniform(0.5, 1.5))
            name = f"landed-{i:03d}.jpg"
            out.append(searchable_after(client, base, name, land(photo, folder, name)))
    return out


def run_mode(mode: str, work: Path, photos: list[Path], args: argparse.Namespace) -> dict:
    folder, gallery = work / mode / "photos", work / mode / "gallery"
    folder.mkdir(parents=True)
    env = {**os.environ, "GROUNDSEARCH_CAPTION_BANK": "none", "OMP_NUM_THREADS": "1"}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = ["serve", "--port", str(port), "--index", str(gallery), "--log-level", "warning"]
    procs = []
    try:
        if mode == "serve":
            server = Process([*serve, "--watch", str(folder)], env, work / f"{mode}.log")
            procs.append(server)
        else:  # the watcher writes, a read-only replica answers
            watcher = Process(
                ["index", str(folder), "--watch", "--index", str(gallery), "--workers", "1"],
                env,
                work / f"{mode}-index.log",
            )
            procs.append(watcher)
            deadline = time.monotonic() + READY_S
            while not (gallery / "gallery.db").exists():
                if time.monotonic() > deadline or watcher.proc.poll() is not None:
                    raise SystemExit("the watcher made no gallery: see its log")
                time.sleep(0.1)
            server = Process(serve, {**env, "GROUNDSEARCH_READ_ONLY": "true"}, work / f"{mode}.log")
            procs.append(server)
        wait_ready(base, server)
        load = os.getloadavg()
        values = latencies(base, folder, photos, args.gap)
        result: dict[str, Any] = {
            "mode": mode,
            "photos": len(values),
            "p50_s": statistics.median(values),
            "p90_s": percentile(values, 90, nearest=True),
            "p99_s": percentile(values, 99, nearest=True),
            "max_s": max(values),
            "load_before": [round(x, 2) for x in load],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        }
        if mode == "serve" and args.burst:
            result["burst"] = burst(base, folder, work / "staging", args.burst)
        return result
    finally:
        for proc in reversed(procs):
            proc.stop()


def burst(base: str, folder: Path, staging: Path, n: int) -> dict[str, Any]:
    """``n`` training photos renamed into the folder at once; until all are searchable."""
    staging.mkdir(exist_ok=True)
    photos = flickr("train", n)
    for photo in photos:
        shutil.copyfile(photo, staging / photo.name)
    with httpx.Client(timeout=30) as client:
        before = int(client.get(base + "/ready").json()["images"])
        load = os.getloadavg()
        start = time.perf_counter()
        for photo in photos:
            os.replace(staging / photo.name, folder / photo.name)
        landed = time.perf_counter() - start
        first = None
        while True:
            images = int(client.get(base + "/ready").json()["images"]) - before
            now = time.perf_counter() - start
            if first is None and images > 0:
                first = now
            if images >= n:
                break
            if now > 1800:
                raise SystemExit(f"the burst was not searchable within 30 min ({images}/{n})")
            time.sleep(0.1)
    return {
        "files": n,
        "landed_s": landed,
        "first_searchable_s": first,
        "all_searchable_s": now,
        "photos_per_s": n / now,
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--photos", type=int, default=40, help="photos landed one at a time")
    p.add_argument("--gap", type=float, default=1.0, help="mean seconds between landings")
    p.add_argument("--burst", type=int, default=1000, help="photos landed at once (0: none)")
    p.add_argument("--modes", nargs="+", default=["serve", "index"], choices=["serve", "index"])
    p.add_argument("--work", type=Path, help="work folder (default: a temp folder, removed)")
    p.add_argument("--json", type=Path, help="also write the result here")
    args = p.parse_args()
    if args.photos > 90:
        p.error("--photos must stay under 90 (every photo must be a hit of one search)")
    photos = flickr("test", args.photos)
    work = args.work or Path(tempfile.mkdtemp(prefix="groundsearch-watch-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        started = time.time()
        result: dict[str, Any] = {
            "machine": machine("cpus", "python", "processor"),
            "commit": _commit(),
            "command": " ".join(["python", *sys.argv]),
            "load_at_start": [round(x, 2) for x in os.getloadavg()],
            "cnn": cnn_times(photos),
        }
        result["modes"] = [run_mode(mode, work, photos, args) for mode in args.modes]
        cnn = result["cnn"]["cnn_s"]
        result["target_p50_s"] = 2 * (cnn + 1)
        result["met"] = {m["mode"]: m["p50_s"] <= result["target_p50_s"] for m in result["modes"]}
        result["minutes"] = (time.time() - started) / 60
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    text = json_text(result, digits=3)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        return out.stdout.strip()
    except OSError:
        return ""


if __name__ == "__main__":
    main()
