"""Load test of the HTTP service: /search latency and throughput, /describe latency, server RSS.

    python bench/service_load.py                              # = make bench-service
    python bench/service_load.py --json service_load.json     # every figure as JSON too
    python bench/service_load.py --url http://127.0.0.1:8000  # a server already running

Without --url it starts `groundsearch serve` on a free localhost port with a fresh temporary
cache dir (the GloVe pretrain linked from ~/.cache/groundsearch, the gallery passed with
--index from there when built) and its query cache off (--query-cache 0: every request is
parsed and encoded), waits for GET /ready and stops the server at the end.
Phases: warm-up; /search open loop at --rate req/s spread over --clients clients for
--duration s, latency counted from each request's scheduled send time (queueing counts);
/search closed loop, each client sending again as soon as answered (the most it serves);
/describe with 1 and with 2 clients, each over --describe distinct Flickr8k test photos.
The queries of bench/queries.txt are cycled; the report tells first requests of a query
from repeats. The RSS of the server's process tree is sampled all along. Prints a Markdown
table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from common import free_port, machine, percentile

REPO = Path(__file__).resolve().parent.parent
QUERIES = Path(__file__).resolve().parent / "queries.txt"
DEFAULT_DATA = REPO.parent / "shared" / "data" / "flickr8k"
PRETRAIN = "glove6b50d.pretrain.pt"
# the targets
SEARCH_P50_MS, SEARCH_P99_MS, SEARCH_RATE = 30.0, 150.0, 50.0
DESCRIBE_P50_MS, RSS_MB = 120.0, 1500.0
MAX_REQUESTS_PER_CLIENT = 1_000_000  # a bound on every request loop besides its deadline
SAMPLE_EVERY_S = 0.2


@dataclass
class Sample:
    start: float  # scheduled (open loop) or actual send time, perf_counter seconds
    sent: float
    end: float
    status: int  # 0: no HTTP answer (timeout, connection error)
    first: bool = True  # the first request of its query in this run
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ms(self) -> float:
        return 1000 * (self.end - self.start)


# --------------------------------------------------------------------------- statistics


def latency_stats(samples: list[Sample]) -> dict:
    ms = [s.ms for s in samples if s.status == 200]
    out = {"n": len(ms)}
    for name, q in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100)):
        out[f"{name}_ms"] = percentile(ms, q, digits=1)
    return out


def summarize(samples: list[Sample], t0: float, extra: dict | None = None) -> dict:
    """Requests, errors, achieved rate and latency of one phase."""
    ok = [s for s in samples if s.status == 200]
    wall = max((s.end for s in samples), default=t0) - t0
    stages: dict[str, list[float]] = {}
    for s in ok:
        for stage, value in s.timings.items():
            if isinstance(value, int | float):
                stages.setdefault(stage, []).append(float(value))
    out = {
        "requests": len(samples),
        "errors": len(samples) - len(ok),
        "statuses": {str(k): v for k, v in sorted(Counter(s.status for s in samples).items())},
        "seconds": round(wall, 2),
        "req_per_s": round(len(ok) / wall, 2) if wall > 0 else None,
        **latency_stats(samples),
        "send_lag_p99_ms": round(percentile((1000 * (s.sent - s.start) for s in ok), 99) or 0, 1),
        "server_stage_median_ms": {k: round(statistics.median(v), 2) for k, v in stages.items()},
    }
    firsts = [s for s in samples if s.first]
    if len(firsts) < len(samples):
        out["first_of_query"] = latency_stats(firsts)
        out["repeated_query"] = latency_stats([s for s in samples if not s.first])
    return out | (extra or {})


# --------------------------------------------------------------------------- the server process


def proc_children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    return children


def tree_usage(root: int) -> tuple[int, float] | None:
    """(RSS bytes, CPU seconds) of a process and its descendants; None once it is gone."""
    children = proc_children()
    todo, rss, cpu, found = [root], 0, 0.0, False
    tick = os.sysconf("SC_CLK_TCK")
    for _ in range(10_000):  # bounded walk of the tree
        if not todo:
            break
        pid = todo.pop()
        with contextlib.suppress(OSError, ValueError, IndexError):
            status = Path(f"/proc/{pid}/status").read_text()
            kb = next(
                (line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")), "0"
            )
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            rss += int(kb) * 1024
            cpu += (int(stat[11]) + int(stat[12])) / tick
            found = True
        todo.extend(children.get(pid, []))
    return (rss, cpu) if found else None


def listening_pid(port: int) -> int | None:
    """The process listening on a local TCP port (from /proc/net/tcp*), if it can be seen."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{cols[9]}]")
    for entry in Path("/proc").iterdir() if inodes else ():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                for fd in (entry / "fd").iterdir():
                    with contextlib.suppress(OSError):
                        if os.readlink(fd) in inodes:
                            return int(entry.name)
    return None


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all cores, from /proc/stat)."""
    cols = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    # user nice system idle iowait irq softirq steal: all but idle and iowait
    return (sum(cols[:8]) - cols[3] - cols[4]) / os.sysconf("SC_CLK_TCK")


class Sampler(threading.Thread):
    """Every SAMPLE_EVERY_S seconds: the server tree's RSS and CPU time, the machine's CPU."""

    def __init__(self, pid: int | None) -> None:
        super().__init__(daemon=True)
        self.pid, self.samples = pid, []  # (perf_counter, rss bytes, server cpu s, machine cpu s)
        self.stop_event = threading.Event()

    def sample(self) -> None:
        usage = tree_usage(self.pid) if self.pid else None
        rss, cpu = usage or (None, None)
        self.samples.append((time.perf_counter(), rss, cpu, machine_busy_s()))

    def run(self) -> None:
        while not self.stop_event.wait(SAMPLE_EVERY_S):
            self.sample()

    def rss_mb(self) -> list[float]:
        return [s[1] / 1e6 for s in self.samples if s[1] is not None]

    def window(self, t0: float, t1: float) -> dict:
        """Peak RSS and CPU use (in cores) of the server and the whole machine over [t0, t1]."""
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if len(inside) < 2:
            return {}
        first, last = inside[0], inside[-1]
        out = {"machine_cpu_cores": round((last[3] - first[3]) / (last[0] - first[0]), 2)}
        if last[1] is not None and first[2] is not None:
            out["rss_peak_mb"] = round(max(s[1] for s in inside if s[1]) / 1e6, 1)
            out["server_cpu_cores"] = round((last[2] - first[2]) / (last[0] - first[0]), 2)
        return out


class Server:
    """`groundsearch serve` as a child process in its own session, always stopped on exit."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.proc, self.tmp = args, None, None
        self.picked_up: Path | None = None  # the cache's gallery, taken without --index
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        fd, log = tempfile.mkstemp(prefix="groundsearch-serve-", suffix=".log")
        os.close(fd)
        self.log_path = Path(log)
        self.cache_dir, self.index = self.prepare_dirs()

    def prepare_dirs(self) -> tuple[Path, Path | None]:
        args = self.args
        if args.cache_dir:
            return args.cache_dir, args.index
        source = Path(
            os.environ.get("GROUNDSEARCH_CACHE_DIR", Path.home() / ".cache" / "groundsearch")
        )
        self.tmp = Path(tempfile.mkdtemp(prefix="groundsearch-bench-cache-"))
        if (source / PRETRAIN).exists():
            (self.tmp / PRETRAIN).symlink_to((source / PRETRAIN).resolve())
        if (source / "stanza-resources").is_dir():
            shutil.copytree(source / "stanza-resources", self.tmp / "stanza-resources")
        index = args.index
        if index is None and (source / "gallery").is_dir():
            index = source / "gallery"
            self.picked_up = index
        return self.tmp, index

    def command(self) -> list[str]:
        exe = self.args.groundsearch or shutil.which(
            "groundsearch", path=str(Path(sys.executable).parent)
        )
        if not exe:
            exe = shutil.which("groundsearch")
        if not exe:
            raise SystemExit("groundsearch executable not found (pass --groundsearch or --url)")
        cmd = [exe, "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        return cmd + (["--index", str(self.index)] if self.index else [])

    def start(self) -> None:
        # no caption bank: embedding it on a cold cache would run beside the load
        env = {"GROUNDSEARCH_CAPTION_BANK": "none"} | os.environ
        env |= {"GROUNDSEARCH_CACHE_DIR": str(self.cache_dir)}
        env["GROUNDSEARCH_QUERY_CACHE"] = str(self.args.query_cache)
        cmd = self.command()
        print(
            f"starting: {shlex.join(cmd)} (GROUNDSEARCH_CACHE_DIR={self.cache_dir}, "
            f"log {self.log_path})",
            file=sys.stderr,
        )
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=REPO
            )

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            hint = ""
            if self.picked_up is not None:
                hint = (
                    f"\n(its gallery, {self.picked_up}, was taken from the cache because no "
                    "--index was given: pass --index with a gallery the served model built)"
                )
            raise SystemExit(
                f"the server exited with {self.proc.returncode}:\n{self.log_tail()}{hint}"
            )

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self, keep_log: bool) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, sig)
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        if keep_log:
            print(f"the server's log: {self.log_path}", file=sys.stderr)
        else:
            self.log_path.unlink(missing_ok=True)


def wait_ready(url: str, timeout_s: float, server: Server | None) -> dict:
    """``/ready``'s answer once the server is ready and its caption bank loaded: a bank
    still embedding (a server's first start on a cache) parses 52,000 captions beside the
    requests timed (``/search`` p50 15.5 against 11.7–13.5 ms once loaded, 2026-12-02)."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    with httpx.Client(base_url=url, timeout=5, trust_env=False) as http:
        while time.monotonic() < deadline:
            if server:
                server.check_alive()
            try:
                answer = http.get("/ready")
                if answer.status_code == 200:
                    ready = answer.json()
                    if not str(ready.get("caption_bank", "")).startswith(("loading", "embedding")):
                        return ready
                last = f"{answer.status_code} {answer.text[:200]}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.5)
    raise SystemExit(f"{url}/ready not 200 after {timeout_s:.0f} s (last: {last})")


# --------------------------------------------------------------------------- load


class QueryFeed:
    """Cycles through the queries; tells the first request of each query from repeats."""

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.i, self.seen = texts, 0, set()

    def next(self) -> tuple[str, bool]:
        text = self.texts[self.i % len(self.texts)]
        self.i += 1
        first = text not in self.seen
        self.seen.add(text)
        return text, first


def client(url: str, timeout: float) -> httpx.AsyncClient:
    # one connection per simulated client; trust_env=False: never through a proxy
    return httpx.AsyncClient(
        base_url=url, timeout=timeout, trust_env=False, limits=httpx.Limits(max_connections=1)
    )


async def search_once(http: httpx.AsyncClient, feed: QueryFeed, k: int, start: float) -> Sample:
    text, first = feed.next()
    sent = time.perf_counter()
    status, timings = 0, {}
    try:
        answer = await http.post("/search", params={"text": text, "k": k})
        status = answer.status_code
        if status == 200:
            timings = answer.json().get("timings_ms") or {}
    except (httpx.HTTPError, ValueError):
        pass
    return Sample(start, sent, time.perf_counter(), status, first, timings)


async def search_open(
    args: argparse.Namespace, url: str, feed: QueryFeed
) -> tuple[list, float, int]:
    """args.rate req/s in all, request i scheduled at t0 + i/rate on client i % clients."""
    n = max(1, round(args.rate * args.duration))
    t0 = time.perf_counter() + 0.1
    hard_stop = t0 + args.duration + args.timeout  # a client this far behind stops sending
    samples: list[Sample] = []
    unsent = 0

    async def run(c: int) -> None:
        nonlocal unsent
        async with client(url, args.timeout) as http:
            for i in range(c, n, args.clients):
                scheduled = t0 + i / args.rate
                delay = scheduled - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                elif time.perf_counter() > hard_stop:
                    unsent += len(range(i, n, args.clients))
                    return
                samples.append(await search_once(http, feed, args.k, scheduled))

    await asyncio.gather(*(run(c) for c in range(args.clients)))
    return samples, t0, unsent


async def search_closed(args: argparse.Namespace, url: str, feed: QueryFeed) -> tuple[list, float]:
    t0 = time.perf_counter()
    deadline = t0 + args.closed_duration
    samples: list[Sample] = []

    async def run(_: int) -> None:
        async with client(url, args.timeout) as http:
            for _ in range(MAX_REQUESTS_PER_CLIENT):
                if time.perf_counter() >= deadline:
                    return
                samples.append(await search_once(http, feed, args.k, time.perf_counter()))

    await asyncio.gather(*(run(c) for c in range(args.clients)))
    return samples, t0


async def describe(
    args: argparse.Namespace, url: str, photos: list, clients: int
) -> tuple[list, float]:
    t0 = time.perf_counter()
    samples: list[Sample] = []
    todo = iter(photos)

    async def run(_: int) -> None:
        async with client(url, args.timeout) as http:
            for name, data in todo:  # shared iterator: each photo is sent once
                start = time.perf_counter()
                status, timings = 0, {}
                try:
                    answer = await http.post(
                        "/describe", params={"k": 5}, files={"image": (name, data, "image/jpeg")}
                    )
                    status = answer.status_code
                    if status == 200:
                        timings = answer.json().get("timings_ms") or {}
                except (httpx.HTTPError, ValueError):
                    pass
                samples.append(Sample(start, start, time.perf_counter(), status, True, timings))

    await asyncio.gather(*(run(c) for c in range(clients)))
    return samples, t0


def load_queries(path: Path, seed: int) -> list[str]:
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    texts = list(dict.fromkeys(line for line in lines if line and not line.startswith("#")))
    random.Random(seed).shuffle(texts)
    return texts


def load_photos(data: Path, n: int) -> list[tuple[str, bytes]]:
    split = data / "Flickr_8k.testImages.txt"
    if not split.exists():
        raise SystemExit(f"{split} not found (pass --data, or --describe 0)")
    names = [line.strip() for line in split.read_text().splitlines() if line.strip()][:n]
    if len(names) < n:
        raise SystemExit(f"{split} lists {len(names)} photos, {n} needed")
    return [(name, (data / "Images" / name).read_bytes()) for name in names]


async def run_phases(args: argparse.Namespace, url: str, sampler: Sampler) -> dict:
    texts = load_queries(args.queries, args.seed)
    if len(texts) <= args.warmup:
        raise SystemExit(f"{args.queries}: {len(texts)} distinct queries, need > --warmup")
    cut = len(texts) - args.warmup
    warm, texts = texts[cut:], texts[:cut]
    feed = QueryFeed(texts)
    photos = load_photos(args.data, 2 * args.describe + 2) if args.describe else []
    phases = {}

    def measured(t0: float) -> dict:
        return sampler.window(t0, time.perf_counter())

    def cpu_since(cpu0: float, t0: float) -> dict:
        return {
            "loadgen_cpu_cores": round((time.process_time() - cpu0) / (time.perf_counter() - t0), 2)
        }

    # warm-up: queries not used later, and two photos not described later
    print(f"warm-up: {len(warm)} queries, {min(2, len(photos))} photos", file=sys.stderr)
    async with client(url, args.timeout) as http:
        warm_feed = QueryFeed(warm)
        for _ in warm:
            await search_once(http, warm_feed, args.k, time.perf_counter())
    if photos:
        await describe(args, url, photos[-2:], 1)

    print(
        f"/search open loop: {args.rate} req/s, {args.clients} clients, {args.duration} s",
        file=sys.stderr,
    )
    cpu0 = time.process_time()
    samples, t0, unsent = await search_open(args, url, feed)
    extra = {"unsent": unsent, "scheduled": max(1, round(args.rate * args.duration))}
    phases["search_open"] = summarize(samples, t0, extra | cpu_since(cpu0, t0) | measured(t0))

    if args.closed_duration > 0:
        print(
            f"/search closed loop: {args.clients} clients, {args.closed_duration} s",
            file=sys.stderr,
        )
        cpu0 = time.process_time()
        samples, t0 = await search_closed(args, url, feed)
        phases["search_closed"] = summarize(samples, t0, cpu_since(cpu0, t0) | measured(t0))

    for clients in (1, 2) if args.describe else ():
        batch = photos[(clients - 1) * args.describe : clients * args.describe]
        print(f"/describe: {len(batch)} photos, {clients} client(s)", file=sys.stderr)
        cpu0 = time.process_time()
        samples, t0 = await describe(args, url, batch, clients)
        extra = cpu_since(cpu0, t0) | measured(t0)
        phases[f"describe_{clients}"] = summarize(samples, t0, extra)

    return {
        "queries": {
            "file": str(
                args.queries.relative_to(REPO)
                if args.queries.is_relative_to(REPO)
                else args.queries
            ),
            "distinct": len(texts),
            "warmup": len(warm),
            "sent": feed.i,
            "cycles": round(feed.i / len(texts), 2),
            "repeat_within_run": feed.i > len(texts),
        },
        "phases": phases,
    }


# --------------------------------------------------------------------------- report


def git_commit() -> str:
    try:
        run = {"cwd": REPO, "capture_output": True, "text": True, "timeout": 10, "check": True}
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], **run).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], **run
        ).stdout
        return commit + ("+dirty" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def met(ok: bool | None) -> str:
    return "" if ok is None else ("yes" if ok else "**no**")


def markdown(report: dict) -> str:
    m, server, q, ph, a = (report[k] for k in ("machine", "server", "queries", "phases", "args"))
    rss, ok = report["rss_mb"], report["met"]
    repeats = "repeats within the run" if q["repeat_within_run"] else "no repeats"
    lines = [
        f"Machine: {m['cpu']}, {m['nproc']} cores (nproc), {m['memory_gib']} GiB, "
        f"Python {m['python']}, httpx {m['httpx']}; {report['date']}; "
        f"commit `{report['commit']}`.",
        f"Command: `{report['command']}`",
        f"Server: {server['how']}; encoder {server.get('encoder')}, gallery "
        f"{server.get('images')} images / {server.get('captions')} captions. "
        "The load generator runs on the same cores.",
        f"Queries: {q['distinct']} distinct from `{q['file']}` (shuffled), cycled "
        f"{q['cycles']}× in all ({repeats}); {q['warmup']} more warm the server up.",
        "",
        "| what | result | target | met |",
        "|---|---:|---:|:---:|",
    ]

    def row(what: str, result: str, target: str = "", good: bool | None = None) -> None:
        lines.append(f"| {what} | {result} | {target} | {met(good)} |")

    def pcts(s: dict, names: tuple[str, ...] = ("p50", "p90", "p99")) -> str:
        return " / ".join(fmt(s[f"{n}_ms"]) for n in names) + " ms"

    o = ph["search_open"]
    row(
        f"`/search` open loop, {a['rate']:g} req/s over {a['clients']} clients, "
        f"{a['duration']:g} s: p50 / p90 / p99 / max",
        f"**{pcts(o, ('p50', 'p90', 'p99', 'max'))}**",
        f"p50 ≤ {SEARCH_P50_MS:g} ms, p99 ≤ {SEARCH_P99_MS:g} ms",
        ok["search_latency"],
    )
    row(
        "… achieved rate; errors; not sent",
        f"**{fmt(o['req_per_s'])} req/s**; {o['errors']} of {o['requests']}; {o['unsent']}",
        f"≥ {SEARCH_RATE:g} req/s",
        ok["search_rate"],
    )
    for key, label in (
        ("first_of_query", "first request of a query"),
        ("repeated_query", "repeat"),
    ):
        if key in o:
            row(f"… {label} only ({o[key]['n']}): p50 / p99", pcts(o[key], ("p50", "p99")))
    if "search_closed" in ph:
        c = ph["search_closed"]
        row(
            f"`/search` closed loop, {a['clients']} clients, {a['closed_duration']:g} s: "
            "throughput; p50 / p99; errors",
            f"**{fmt(c['req_per_s'])} req/s**; {pcts(c, ('p50', 'p99'))}; "
            f"{c['errors']} of {c['requests']}",
        )
    for clients in (1, 2):
        d = ph.get(f"describe_{clients}")
        if d:
            row(
                f"`/describe`, {clients} client(s), {d['requests']} Flickr8k test photos: "
                "p50 / p90 / p99; rate; errors",
                f"**{pcts(d)}**; {fmt(d['req_per_s'])} req/s; {d['errors']}",
                f"p50 ≤ {DESCRIBE_P50_MS:g} ms" if clients == 1 else "",
                ok["describe_latency"] if clients == 1 else None,
            )
    if rss:
        row(
            "server RSS (process tree): ready / peak / end",
            f"{fmt(rss['ready'], 0)} / **{fmt(rss['peak'], 0)}** / {fmt(rss['end'], 0)} MB",
            f"≤ {RSS_MB:g} MB",
            ok["rss"],
        )
    lines.append("")
    for name, p in ph.items():
        load = p["loadgen_cpu_cores"]
        cpu = f"load generator {load:.2f}"
        if "server_cpu_cores" in p and "machine_cpu_cores" in p:
            other = max(0.0, p["machine_cpu_cores"] - p["server_cpu_cores"] - load)
            cpu = (
                f"machine {p['machine_cpu_cores']:.2f} = server {p['server_cpu_cores']:.2f} "
                f"+ {cpu} + other processes {other:.2f}"
            )
        stages = ", ".join(f"{k} {v:g}" for k, v in p["server_stage_median_ms"].items())
        lines.append(
            f"- {name}: CPU in cores: {cpu}; server stages (median `timings_ms`): "
            f"{stages or '–'} ms"
        )
    return "\n".join(lines)


def targets_met(phases: dict, rss: dict, rate: float) -> dict:
    o = phases["search_open"]
    d = phases.get("describe_1")
    complete = o["errors"] == 0 and o["unsent"] == 0
    return {
        "search_latency": complete
        and o["p50_ms"] is not None
        and o["p50_ms"] <= SEARCH_P50_MS
        and o["p99_ms"] <= SEARCH_P99_MS,
        # the last answers arrive a latency after the last send: allow 1% for that tail
        "search_rate": complete
        and rate >= SEARCH_RATE
        and (o["req_per_s"] or 0) >= 0.99 * SEARCH_RATE,
        "describe_latency": None
        if d is None
        else d["errors"] == 0 and d["p50_ms"] is not None and d["p50_ms"] <= DESCRIBE_P50_MS,
        "rss": None if not rss else rss["peak"] <= RSS_MB,
    }


# --------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--url", help="a running server (default: start `groundsearch serve`)")
    ap.add_argument(
        "--pid", type=int, help="with --url: the server's pid, for RSS (default: found by port)"
    )
    ap.add_argument(
        "--groundsearch", help="the groundsearch executable (default: beside this Python)"
    )
    ap.add_argument("--index", type=Path, help="gallery for the started server (`serve --index`)")
    ap.add_argument(
        "--cache-dir",
        type=Path,
        help="GROUNDSEARCH_CACHE_DIR of the started server (default: a fresh temporary one)",
    )
    ap.add_argument(
        "--query-cache",
        type=int,
        default=0,
        help="GROUNDSEARCH_QUERY_CACHE of the started server (default 0: off; the service's: 4096)",
    )
    ap.add_argument("--ready-timeout", type=float, default=900, help="seconds to wait for /ready")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rate", type=float, default=SEARCH_RATE, help="open-loop req/s in all")
    ap.add_argument("--duration", type=float, default=30, help="open-loop seconds")
    ap.add_argument(
        "--closed-duration", type=float, default=20, help="closed-loop seconds (0: skip)"
    )
    ap.add_argument("--warmup", type=int, default=16, help="queries kept apart to warm up")
    ap.add_argument("--k", type=int, default=10, help="results per search")
    ap.add_argument("--describe", type=int, default=100, help="photos per /describe run (0: skip)")
    ap.add_argument("--queries", type=Path, default=QUERIES)
    ap.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="Flickr8k folder (Images/, split lists)"
    )
    ap.add_argument("--timeout", type=float, default=30, help="seconds per request")
    ap.add_argument("--seed", type=int, default=0, help="query order")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    if (
        args.clients < 1
        or args.rate <= 0
        or args.duration <= 0
        or args.warmup < 0
        or args.describe < 0
    ):
        ap.error("--clients, --rate and --duration must be positive, --warmup and --describe ≥ 0")
    return args


def main() -> None:
    args = parse_args()
    # SIGINT, SIGTERM and SIGHUP unwind (even where SIGINT came ignored, as in a background
    # job), so the finally below stops the server
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _: sys.exit(128 + signum))
    server, sampler = None, None
    try:
        if args.url:
            url = args.url.rstrip("/")
            port = httpx.URL(url).port or 80
            pid = args.pid or (
                listening_pid(port) if httpx.URL(url).host in ("127.0.0.1", "localhost") else None
            )
            how = f"a running server at {url}"
        else:
            server = Server(args)
            server.start()
            url, pid = server.url, server.proc.pid
            fresh = "a fresh temporary cache dir" if server.tmp else f"cache dir {server.cache_dir}"
            index = server.index or "default"
            how = (
                f"`groundsearch serve` started by the script ({fresh}, index {index}, "
                f"GROUNDSEARCH_QUERY_CACHE={args.query_cache})"
            )
        started = time.monotonic()
        ready = wait_ready(url, args.ready_timeout, server)
        print(f"ready after {time.monotonic() - started:.1f} s: {ready}", file=sys.stderr)
        sampler = Sampler(pid)
        sampler.sample()
        sampler.start()
        result = asyncio.run(run_phases(args, url, sampler))
        if server:
            server.check_alive()
    finally:
        if sampler:
            sampler.stop_event.set()
            sampler.join(2)
            sampler.sample()
        if server:
            server.stop(keep_log=sys.exc_info()[0] is not None)
    rss = {}
    mbs = sampler.rss_mb() if sampler else []
    if mbs:
        rss = {"ready": round(mbs[0], 1), "peak": round(max(mbs), 1), "end": round(mbs[-1], 1)}
    report = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "command": shlex.join(["python", "bench/service_load.py", *sys.argv[1:]]),
        "machine": machine(),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "server": {"how": how, "pid": pid, **ready},
        **result,
        "rss_mb": rss,
    }
    report["met"] = targets_met(report["phases"], rss, args.rate)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(markdown(report))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
