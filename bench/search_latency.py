"""/search for sentences it has never seen, timed from the client: the direct parse
beside stanza's pipeline, on the same sentences in the same run.

    python bench/search_latency.py                        # the default gallery
    python bench/search_latency.py --index DIR --queries 100
    python bench/search_latency.py --before TREE          # and an older checkout's server

Starts `groundsearch serve` on one gallery (default: the one `groundsearch index
--flickr8k` writes, the 1,000 Flickr8k test photos) with its query cache off, once per
variant: ``pipeline`` (``GROUNDSEARCH_PARSE_PIPELINE=1``: every text through
``stanza.Pipeline``), ``direct`` (the direct path), and with ``--before TREE`` a
``before`` server run from another checkout's code (TREE holds a ``groundsearch``
package folder as ``make typecheck`` lays one out; it goes first on PYTHONPATH). Each
server gets the same distinct Flickr8k *training* captions (never in the gallery, each
sent once per server) from 1 client, then from 8 concurrent clients, after a few warm-up
sentences of its own. Prints JSON: client p50/p99 of each, the ratios to the first
variant, and the median of the server's own stage timings (``timings_ms``: parse,
encode, search). A request refused under load (429) is sent again after 20 ms, its
latency counted from the first try. The servers run side by side: with ``--blocks N``
each phase's sentences go in N blocks, the variants taking turns (ABBA…), so a machine
whose speed drifts within the run slows them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from service_load import DEFAULT_DATA, Server, wait_ready

from common import latency, machine

#: Pause before sending a refused (429) request again.
RETRY_S = 0.02
#: Each variant's environment.
VARIANTS = {
    "pipeline": {"GROUNDSEARCH_PARSE_PIPELINE": "1"},
    "direct": {"GROUNDSEARCH_PARSE_PIPELINE": "0"},
    # the direct path in the server's own process (no parser process, no pipe)
    "in-process": {"GROUNDSEARCH_PARSE_PIPELINE": "0", "GROUNDSEARCH_PARSE_WORKERS": "0"},
}


def sentences(data: Path, n: int, seed: int) -> list[str]:
    """Distinct training-split captions of at most 15 words."""
    train = set((data / "Flickr_8k.trainImages.txt").read_text().split())
    out = set()
    for line in (data / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines():
        name, _, text = line.partition("\t")
        if name.split("#")[0] in train and len(text.split()) <= 15:
            out.add(text.strip())
    return random.Random(seed).sample(sorted(out), n)


def search(http: httpx.Client, text: str, k: int) -> tuple[float, dict, int]:
    """Milliseconds until answered (a 429 is retried after a short pause: the time a
    user waits counts it), the server's stage timings and how many tries were refused."""
    start, refused = time.perf_counter(), 0
    while True:
        answer = http.post("/search", params={"text": text, "k": k})
        if answer.status_code != 429:
            break
        refused += 1
        time.sleep(RETRY_S)
    ms = 1000 * (time.perf_counter() - start)
    answer.raise_for_status()
    return ms, answer.json().get("timings_ms", {}), refused


Result = tuple[float, dict, int]


def phase(url: str, texts: list[str], clients: int, k: int) -> list[Result]:
    """Every text once, from ``clients`` concurrent clients (``search``'s answers)."""
    parts = [texts[i::clients] for i in range(clients)]

    def run(part: list[str]) -> list[Result]:
        with httpx.Client(base_url=url, timeout=60, trust_env=False) as http:
            return [search(http, t, k) for t in part]

    with ThreadPoolExecutor(clients) as pool:
        return [r for part in pool.map(run, parts) for r in part]


def summary(results: list[Result]) -> dict:
    """Requests, retried refusals, client p50/p99 and the server's median stages."""
    ms = sorted(r[0] for r in results)
    stages = {
        name: round(statistics.median(r[1][name] for r in results if name in r[1]), 2)
        for name in ("parse", "encode", "search")
        if any(name in r[1] for r in results)
    }
    return {
        "requests": len(ms),
        "refused_then_retried": sum(r[2] for r in results),
        **latency(ms, digits=1),
        "server_median_ms": stages,
    }


def start(args: argparse.Namespace, env: dict[str, str]) -> Server:
    """A server started with ``env`` added to this process's environment."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        server = Server(args)
        server.start()
        return server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path, help="the gallery (default: the default gallery)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Flickr8k folder")
    ap.add_argument("--queries", type=int, default=200, help="sentences per phase")
    ap.add_argument("--clients", default="1,8")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--ready-timeout", type=float, default=900)
    ap.add_argument("--before", type=Path, help="a package tree of older code to serve too")
    ap.add_argument("--variants", default="pipeline,direct", help=f"of {', '.join(VARIANTS)}")
    ap.add_argument("--cache-dir", type=Path, help="the servers' cache (its caption bank kept)")
    ap.add_argument("--blocks", type=int, default=1, help="blocks per phase, variants in turn")
    args = ap.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    pool = sentences(args.data, args.warmup + args.queries * len(clients), seed=0)
    warm, texts = pool[: args.warmup], pool[args.warmup :]
    server_args = argparse.Namespace(
        cache_dir=args.cache_dir, index=args.index, groundsearch=None, query_cache=0
    )
    variants = {name: VARIANTS[name] for name in args.variants.split(",")}
    if args.before:
        variants = {"before": {"PYTHONPATH": str(args.before.resolve())}} | variants
    report: dict = {"machine": machine(), "queries_per_phase": args.queries, "variants": {}}
    servers: dict[str, Server] = {}
    try:
        for name, env in variants.items():
            servers[name] = start(server_args, env)
        for server in servers.values():
            ready = wait_ready(server.url, args.ready_timeout, server)
            report["photos"] = ready.get("images", ready.get("photos"))
            phase(server.url, warm, 1, args.k)
        results: dict[str, dict[int, list[Result]]] = {n: {c: [] for c in clients} for n in servers}
        for i, c in enumerate(clients):
            part = texts[i * args.queries : (i + 1) * args.queries]
            for b in range(args.blocks):
                block = part[b * len(part) // args.blocks : (b + 1) * len(part) // args.blocks]
                for name in list(servers)[:: 1 if b % 2 == 0 else -1]:
                    results[name][c] += phase(servers[name].url, block, c, args.k)
        report["variants"] = {
            name: {f"{c} clients": summary(by[c]) for c in clients} for name, by in results.items()
        }
    finally:
        for server in servers.values():
            server.stop(keep_log=False)
    first, *rest = report["variants"]
    base = report["variants"][first]
    report[f"p50_ratio_to_{first}"] = {
        name: {c: round(v[c]["p50_ms"] / base[c]["p50_ms"], 3) for c in v}
        for name, v in report["variants"].items()
        if name in rest
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
