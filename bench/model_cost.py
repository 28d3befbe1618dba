"""What a model costs the service: `/search` and `/describe` p50 of the shipped artifacts
beside another set of them (the ones before a retraining), in the same run.

    git archive e7d8757^ model/artifacts | tar -x -C /tmp/before   # issue 40's "before"
    python bench/model_cost.py --before /tmp/before/model/artifacts

Indexes the 1,000 Flickr8k test photos once per model (`groundsearch index --flickr8k
--split test`, each into its own gallery under --work, named by its checkpoint's hash: a
gallery belongs to the model that built it), serves both at once (query cache off, the
caption bank on, as served), waits until each has loaded its caption bank, then sends
the same requests to both, alternating which goes first: `--queries` distinct Flickr8k
*training* captions to `/search` (never in the galleries, each sent once per server)
and `--photos` Flickr8k *dev* photos to `/describe` (uploads; never in the galleries).
With `--short`, everyday words ("dog", "a dog") instead of captions (the fused path).
Prints JSON: client p50 / p99 per route and server, their ratio (now ÷ before), the
servers' median stages and what each serves (checkpoint, bank, decoder).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from search_latency import sentences
from service_load import DEFAULT_DATA, wait_ready

from common import free_port, latency, machine

REPO = Path(__file__).resolve().parents[1]


def groundsearch() -> str:
    exe = shutil.which("groundsearch", path=str(Path(sys.executable).parent))
    if exe is None:
        raise SystemExit("groundsearch executable not found beside this Python")
    return exe


def checkpoint_hash(model_dir: Path) -> str:
    """The first 12 hex digits of the SHA-256 of ``model_dir``'s checkpoint."""
    with (model_dir / "sdt-rnn.pt").open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:12]


def index(env: dict[str, str], gallery: Path, log: Path) -> None:
    """The Flickr8k test split into ``gallery`` with the model ``env`` names."""
    if (gallery / "gallery.db").is_file():
        return
    cmd = [groundsearch(), "index", "--flickr8k", "--split", "test", "--index", str(gallery)]
    with log.open("w") as out:
        subprocess.run([*cmd, "--quiet"], env=env, stdout=out, stderr=out, check=True)


def serve(env: dict[str, str], gallery: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [groundsearch(), "serve", "--host", "127.0.0.1", "--port", str(port)]
    out = log.open("w")
    proc = subprocess.Popen(
        [*cmd, "--index", str(gallery)],
        env=env | {"GROUNDSEARCH_QUERY_CACHE": "0"},
        stdout=out,
        stderr=out,
        start_new_session=True,
    )
    return proc, f"http://127.0.0.1:{port}"


def bank_loaded(proc: subprocess.Popen, url: str, log: Path, timeout_s: float) -> dict:
    """``/ready`` once the caption bank has loaded (it loads in the background)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url}: the server exited ({log.read_text().strip()[-500:]})")
        ready = wait_ready(url, timeout_s, None)
        if not str(ready.get("caption_bank", "")).startswith(("loading", "embedding")):
            return ready
        time.sleep(2)
    raise SystemExit(f"{url}: the caption bank did not load in {timeout_s:.0f} s")


def dev_photos(data: Path, n: int) -> list[Path]:
    names = (data / "Flickr_8k.devImages.txt").read_text().split()[:n]
    return [data / "Images" / name for name in names]


def short_texts(n: int) -> list[str]:
    """Up to ``n`` distinct short queries: every everyday word as asked, then bare."""
    from groundsearch.model.training.evaluation.everyday import everyday_queries

    asked = [q.text for q in everyday_queries()]
    bare = [q.concept for q in everyday_queries() if q.concept != q.text]
    return list(dict.fromkeys(asked + bare))[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="a model_dir to compare")
    ap.add_argument("--work", type=Path, default=REPO / "runs" / "model-cost")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--photos", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--short",
        action="store_true",
        help="send short queries instead of captions: each everyday word bare and as "
        "'a WORD' (model.training.evaluation.everyday), as people search a library",
    )
    args = ap.parse_args()

    args.work.mkdir(parents=True, exist_ok=True)
    base = dict(os.environ)
    models = {"before": base | {"GROUNDSEARCH_MODEL_DIR": str(args.before)}, "now": base}
    servers: dict[str, tuple[subprocess.Popen, str]] = {}
    try:
        for name, env in models.items():
            model_dir = Path(env.get("GROUNDSEARCH_MODEL_DIR", REPO / "model" / "artifacts"))
            gallery = args.work / name / f"gallery-{checkpoint_hash(model_dir)}"
            gallery.parent.mkdir(parents=True, exist_ok=True)
            index(env, gallery, args.work / name / "index.log")
            servers[name] = serve(env, gallery, args.work / name / "serve.log")
        ready = {
            name: bank_loaded(proc, url, args.work / name / "serve.log", 1800)
            for name, (proc, url) in servers.items()
        }
        texts = (
            short_texts(args.queries)
            if args.short
            else sentences(args.data, args.queries, args.seed)
        )
        photos = dev_photos(args.data, args.photos)
        ms: dict[str, dict[str, list[float]]] = {
            r: {n: [] for n in models} for r in ("search", "describe")
        }
        stages: dict[str, dict[str, list[dict]]] = {r: {n: [] for n in models} for r in ms}
        with httpx.Client(timeout=120, trust_env=False) as http:
            for _, url in servers.values():  # warm-up
                http.post(f"{url}/search", params={"text": "a dog in the park"})
            for i, text in enumerate(texts):
                order = list(servers) if i % 2 == 0 else list(servers)[::-1]
                for name in order:
                    start = time.perf_counter()
                    answer = http.post(f"{servers[name][1]}/search", params={"text": text})
                    ms["search"][name].append(1000 * (time.perf_counter() - start))
                    answer.raise_for_status()
                    stages["search"][name].append(answer.json().get("timings_ms", {}))
            for i, photo in enumerate(photos):
                data = photo.read_bytes()
                order = list(servers) if i % 2 == 0 else list(servers)[::-1]
                for name in order:
                    start = time.perf_counter()
                    answer = http.post(
                        f"{servers[name][1]}/describe",
                        params={"k": 5},
                        files={"image": (photo.name, data, "image/jpeg")},
                    )
                    ms["describe"][name].append(1000 * (time.perf_counter() - start))
                    answer.raise_for_status()
                    stages["describe"][name].append(answer.json().get("timings_ms", {}))
    finally:
        for proc, _ in servers.values():
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)

    def median_stages(rows: list[dict]) -> dict[str, float]:
        keys = sorted({k for row in rows for k in row})
        return {k: round(sorted(r.get(k, 0.0) for r in rows)[len(rows) // 2], 2) for k in keys}

    out = {
        "machine": machine(),
        "queries": len(texts),
        "photos": len(photos),
        "served": {
            name: {
                k: ready[name].get(k)
                for k in ("checkpoint", "caption_bank", "decoder", "images", "fusion")
            }
            for name in models
        },
    }
    for route, by_model in ms.items():
        out[route] = {name: latency(v) for name, v in by_model.items()}
        out[route]["p50_ratio_now_to_before"] = round(
            out[route]["now"]["p50_ms"] / out[route]["before"]["p50_ms"], 3
        )
        out[route]["stages"] = {name: median_stages(rows) for name, rows in stages[route].items()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
