"""Overload: N clients sending distinct never-cached sentences to `/search`, the 429s timed.

    python bench/overload.py --index GALLERY                        # 8 and 32 clients, 25 s each
    python bench/overload.py --index GALLERY --clients 32 --seconds 20 \\
        --config before:tree=/tmp/before --config after             # two servers, alternately
    python bench/overload.py --index GALLERY --config q8:GROUNDSEARCH_PARSE_QUEUE=8 --config now

Each ``--config NAME[:KEY=VALUE,...]`` is one server (`groundsearch serve` on a free port
over a temporary cache dir, no caption bank: bench/service_load.py's Server) with those
environment variables; ``tree=DIR`` serves the code of another checkout of the repository
(DIR holds groundsearch/, model/, index/, service/, common/: e.g. ``git worktree add DIR
HEAD``), so a change is measured against the code before it. All the servers are started
and made ready first; then, for each client count, the phases run alternately (A B, then
B A in the next ``--rounds``), so every configuration meets the same machine: the figures
to compare are those of one run, never an old one.

A phase: ``clients`` connections (keep-alive, a minimal HTTP/1.1 client on asyncio, so the
load generator takes little of the cores it shares with the server) each POST /search with
the next sentence of Flickr8k's captions (all 40k, shuffled, each answered one used once
in the whole run: never cached) and the next one when answered, after a 429 once its
Retry-After has passed, as a well-behaved client does (``--jitter S``: and up to S s more,
at random; ``--eager``: at once, then the 429s come as fast as the server can give them
and each waits its turn behind the others'). A refused sentence is sent again later:
never parsed, it is still never cached. Besides, GET /health every 50 ms on a connection
of its own: how fast the server's event loop answers a request that takes no work.

Reported for each configuration and client count, its rounds taken together: 2xx/s,
429/s, errors (neither 2xx nor 429, or no answer), admitted and refused p50/p99/max timed
at the client, /health p50/p99/max, the 429s the server itself timed under 10 ms (its
request histogram, /metrics), CPU (server tree, load generator, whole machine), and the
server's event-loop thread (its main thread, /proc/PID/task/PID/schedstat): ms a second
on a CPU and waiting in a run queue for one; each round's figures too with --json.
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
import sys
import tempfile
import time
import urllib.parse
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).parent))
import service_load as sl

from common import machine, markdown_table, percentile

CAPTIONS = sl.DEFAULT_DATA / "Flickr8k.token.txt"
HEALTH_EVERY_S = 0.05
#: The issue's targets at 32 clients.
TARGETS = {"admitted_p99_ms": 300.0, "refused_p99_ms": 10.0, "refused_max_ms": 50.0}
TREE_PACKAGES = ("model", "index", "service", "common")
T = TypeVar("T")


# --------------------------------------------------------------------------- the servers


@dataclass
class Config:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    tree: Path | None = None

    @classmethod
    def parse(cls, spec: str) -> Config:
        name, _, rest = spec.partition(":")
        env = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
        tree = env.pop("tree", None)
        return cls(name, env, Path(tree).resolve() if tree else None)


def tree_layout(tree: Path, into: Path) -> Path:
    """A folder to put first on PYTHONPATH that imports ``groundsearch.*`` from ``tree``
    (the installed layout: groundsearch/model is tree/model, …; the editable install's
    finder comes after the path, so it is not asked)."""
    package = into / "groundsearch"
    package.mkdir(parents=True)
    for entry in (tree / "groundsearch").iterdir():
        (package / entry.name).symlink_to(entry)
    for name in TREE_PACKAGES:
        (package / name).symlink_to(tree / name)
    return into


class Server(sl.Server):
    """service_load's server with a configuration's environment (and code tree)."""

    def __init__(self, args: argparse.Namespace, config: Config) -> None:
        super().__init__(args)
        self.config = config
        self.layout = None
        if config.tree is not None:
            self.layout = Path(tempfile.mkdtemp(prefix=f"overload-{config.name}-"))
            tree_layout(config.tree, self.layout)

    def start(self) -> None:
        saved = dict(os.environ)
        os.environ.update(self.config.env)
        if self.layout is not None:
            path = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = str(self.layout) + (os.pathsep + path if path else "")
        try:
            super().start()
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def stop(self, keep_log: bool) -> None:
        super().stop(keep_log)
        if self.layout is not None:
            shutil.rmtree(self.layout, ignore_errors=True)


# --------------------------------------------------------------------------- a small client


class Connection:
    """One keep-alive HTTP/1.1 connection: a request with no body, the whole answer read."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, target: str) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        self.writer.write(
            f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".encode()
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                key, value = line.split(":", 1)
                headers[key.strip().lower()] = value.strip()
        body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, headers, body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await self.writer.wait_closed()
        self.reader = self.writer = None


class Sentences:
    """Flickr8k's captions, shuffled; each answered one is used once in the whole run."""

    def __init__(self, path: Path, seed: int) -> None:
        texts = [line.split("\t", 1)[1].strip() for line in path.read_text().splitlines() if line]
        self.texts = list(dict.fromkeys(t for t in texts if t))
        random.Random(seed).shuffle(self.texts)
        self.returned: list[str] = []
        self.used = 0

    def take(self) -> str:
        if self.returned:
            return self.returned.pop()
        if self.used >= len(self.texts):
            raise SystemExit("every caption has been used: shorter phases or fewer rounds")
        self.used += 1
        return self.texts[self.used - 1]

    def give_back(self, text: str) -> None:
        """A refused sentence: never parsed, so never cached; sent again later."""
        self.returned.append(text)


@dataclass
class Answer:
    status: int  # 0: no HTTP answer
    ms: float
    end: float


async def load_phase(
    port: int, clients: int, seconds: float, sentences: Sentences, backoff: bool, jitter: float
) -> tuple[list[Answer], list[Answer], float]:
    """(the /search answers, the /health answers, the phase's start); ``backoff``: after
    a 429 a client waits its Retry-After (and up to ``jitter`` s more, at random)."""
    t0 = time.perf_counter()
    deadline = t0 + seconds
    answers: list[Answer] = []
    health: list[Answer] = []

    async def client() -> None:
        conn = Connection(port)
        try:
            while time.perf_counter() < deadline:
                text = sentences.take()
                target = "/search?" + urllib.parse.urlencode({"text": text, "k": 10})
                start = time.perf_counter()
                try:
                    status, headers, _ = await asyncio.wait_for(conn.request("POST", target), 60)
                except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                    status, headers = 0, {}
                    await conn.close()
                end = time.perf_counter()
                answers.append(Answer(status, 1000 * (end - start), end))
                if status == 429:
                    sentences.give_back(text)
                    if backoff:
                        wait = float(headers.get("retry-after", "1")) + jitter * random.random()
                        await asyncio.sleep(max(0.0, min(wait, deadline - time.perf_counter())))
                elif status == 0:
                    sentences.give_back(text)
                    await asyncio.sleep(0.1)
        finally:
            await conn.close()

    async def prober() -> None:
        conn = Connection(port)
        try:
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                try:
                    status, _, _ = await asyncio.wait_for(conn.request("GET", "/health"), 60)
                except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                    status = 0
                    await conn.close()
                end = time.perf_counter()
                health.append(Answer(status, 1000 * (end - start), end))
                await asyncio.sleep(max(0.0, start + HEALTH_EVERY_S - time.perf_counter()))
        finally:
            await conn.close()

    await asyncio.gather(*(client() for _ in range(clients)), prober())
    return answers, health, t0


# --------------------------------------------------------------------------- figures


def ms_stats(values: list[float]) -> dict:
    return {
        "n": len(values),
        **{
            f"{name}_ms": percentile(values, q, digits=1)
            for name, q in (("p50", 50), ("p99", 99), ("max", 100))
        },
    }


def refusals_within(metrics_text: str, le: str = "0.01") -> tuple[float, float]:
    """(429 answers the server timed within ``le`` s, all 429 answers) in /metrics."""
    within = total = 0.0
    for line in metrics_text.splitlines():
        if not line.startswith("groundsearch_request_seconds_bucket") or 'status="429"' not in line:
            continue
        value = float(line.rsplit(" ", 1)[1])
        if f'le="{le}"' in line:
            within += value
        elif 'le="+Inf"' in line:
            total += value
    return within, total


def schedstat(pid: int) -> tuple[int, int, int]:
    """(ns on a CPU, ns waiting on a run queue for one, time slices) of thread ``pid``
    (the process's main thread: the event loop's) from /proc, zeros if unreadable."""
    with contextlib.suppress(OSError, ValueError):
        run, wait, slices = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[:3]
        return int(run), int(wait), int(slices)
    return 0, 0, 0


def loop_thread(first: tuple[int, int, int], last: tuple[int, int, int], seconds: float) -> dict:
    """The event-loop thread over a phase: ms a second on a CPU and waiting for one, and
    the mean wait for a CPU each time it became runnable (a time slice)."""
    run, wait, slices = (b - a for a, b in zip(first, last, strict=True))
    return {
        "loop_cpu_ms_per_s": round(run / 1e6 / seconds, 1),
        "loop_runqueue_ms_per_s": round(wait / 1e6 / seconds, 1),
        "loop_runqueue_ms_per_slice": round(wait / 1e6 / max(slices, 1), 3),
    }


async def scrape(port: int) -> str:
    conn = Connection(port)
    try:
        _, _, body = await conn.request("GET", "/metrics")
        return body.decode()
    finally:
        await conn.close()


async def warm(port: int, sentences: Sentences, n: int) -> None:
    conn = Connection(port)
    try:
        for _ in range(n):
            text = sentences.take()
            await conn.request("POST", "/search?" + urllib.parse.urlencode({"text": text, "k": 10}))
    finally:
        await conn.close()


@dataclass
class Phase:
    """One phase's answers and readings (``pool`` sums the rounds of a configuration)."""

    config: str
    clients: int
    seconds: float
    statuses: Counter
    ok: list[float]
    refused: list[float]
    health: list[float]
    fast_429: tuple[float, float]  # (the server timed ≤ 10 ms, all), from /metrics
    readings: dict  # CPU (cores) and the loop thread's ms a second


async def measure(
    server: Server, clients: int, args: argparse.Namespace, sentences: Sentences
) -> Phase:
    sampler = sl.Sampler(server.proc.pid)
    sampler.start()
    await warm(server.port, sentences, args.warmup)
    before = refusals_within(await scrape(server.port))
    loop0 = schedstat(server.proc.pid)
    cpu0 = time.process_time()
    answers, health, t0 = await load_phase(
        server.port, clients, args.seconds, sentences, not args.eager, args.jitter
    )
    loadgen = (time.process_time() - cpu0) / (time.perf_counter() - t0)
    loop = loop_thread(loop0, schedstat(server.proc.pid), time.perf_counter() - t0)
    after = refusals_within(await scrape(server.port))
    sampler.stop_event.set()
    sampler.join()
    return Phase(
        server.config.name,
        clients,
        max((a.end for a in answers), default=t0) - t0,
        Counter(a.status for a in answers),
        [a.ms for a in answers if 200 <= a.status < 300],
        [a.ms for a in answers if a.status == 429],
        [a.ms for a in health if a.status == 200],
        (after[0] - before[0], after[1] - before[1]),
        {"loadgen_cpu_cores": round(loadgen, 2), **loop, **sampler.window(t0, time.perf_counter())},
    )


def pool(phases: list[Phase]) -> dict:
    """The figures of a configuration's phases (its rounds) taken together: rates over
    their summed time, percentiles over all their answers, readings averaged."""
    seconds = sum(p.seconds for p in phases)
    statuses = sum((p.statuses for p in phases), Counter())
    ok = [ms for p in phases for ms in p.ok]
    refused = [ms for p in phases for ms in p.refused]
    readings = {
        key: round(sum(p.readings.get(key, 0) for p in phases) / len(phases), 2)
        for key in phases[0].readings
    }
    return {
        "config": phases[0].config,
        "clients": phases[0].clients,
        "rounds": len(phases),
        "seconds": round(seconds, 1),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "ok_per_s": round(len(ok) / seconds, 1),
        "refused_per_s": round(len(refused) / seconds, 1),
        "errors": sum(v for k, v in statuses.items() if not (200 <= k < 300 or k == 429)),
        "admitted": ms_stats(ok),
        "refused": ms_stats(refused),
        "refused_over_10ms": sum(ms > 10 for ms in refused),
        "health": ms_stats([ms for p in phases for ms in p.health]),
        "server_429_within_10ms": "{:.0f} of {:.0f}".format(
            *(sum(p.fast_429[i] for p in phases) for i in (0, 1))
        ),
        **readings,
    }


def cell(stats: dict) -> str:
    return " / ".join(
        "–" if stats[k] is None else f"{stats[k]:g}" for k in ("p50_ms", "p99_ms", "max_ms")
    )


def table(rows: list[dict]) -> list[str]:
    header = [
        "clients",
        "config",
        "s",
        "2xx/s",
        "429/s",
        "errors",
        "admitted p50 / p99 / max ms",
        "refused p50 / p99 / max ms",
        "`/health` p50 / p99 / max ms",
        "429s the server timed ≤ 10 ms",
        "CPU: server / load gen. / machine",
        "loop thread, ms/s: on a CPU / waiting for one",
    ]
    body = [
        [
            r["clients"],
            r["config"],
            r["seconds"],
            r["ok_per_s"],
            r["refused_per_s"],
            r["errors"],
            cell(r["admitted"]),
            cell(r["refused"]),
            cell(r["health"]),
            r["server_429_within_10ms"],
            f"{r.get('server_cpu_cores', '–')} / {r['loadgen_cpu_cores']} / "
            f"{r.get('machine_cpu_cores', '–')}",
            f"{r['loop_cpu_ms_per_s']} / {r['loop_runqueue_ms_per_s']}",
        ]
        for r in rows
    ]
    return markdown_table(header, body, align="llrrrr")


def verdicts(rows: list[dict], clients: int = 32) -> list[str]:
    out = []
    for r in rows:
        if r["clients"] != clients:
            continue
        checks = {
            "0 errors": r["errors"] == 0,
            f"admitted p99 ≤ {TARGETS['admitted_p99_ms']:g} ms": (r["admitted"]["p99_ms"] or 0)
            <= TARGETS["admitted_p99_ms"],
            f"refused p99 ≤ {TARGETS['refused_p99_ms']:g} ms": (r["refused"]["p99_ms"] or 0)
            <= TARGETS["refused_p99_ms"],
            f"refused max ≤ {TARGETS['refused_max_ms']:g} ms": (r["refused"]["max_ms"] or 0)
            <= TARGETS["refused_max_ms"],
        }
        met = ", ".join(f"{k}: {'met' if v else 'missed'}" for k, v in checks.items())
        out.append(f"- {r['config']}, {clients} clients: {met}")
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--index", type=Path, help="the gallery served (default: serve's own)")
    p.add_argument(
        "--config",
        action="append",
        type=Config.parse,
        help="NAME[:KEY=VALUE,...]: a server with these environment variables (tree=DIR: "
        "the code of that checkout); repeat to compare (default: one, 'now')",
    )
    p.add_argument("--clients", default="8,32", help="client counts, comma-separated")
    p.add_argument("--seconds", type=float, default=25.0, help="each phase's length")
    p.add_argument("--rounds", type=int, default=1, help="alternations (A B, then B A, …)")
    p.add_argument("--warmup", type=int, default=20, help="sentences before each phase")
    p.add_argument(
        "--eager",
        action="store_true",
        help="after a 429 send again at once (default: wait its Retry-After, as a "
        "well-behaved client does; eager clients measure how many 429s a second the "
        "server can give: each then waits for the others')",
    )
    p.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        help="after a 429 wait up to this many seconds more than Retry-After, at random "
        "(default 0: the refused clients come back together, a burst the server "
        "refuses one after the other)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--captions", type=Path, default=CAPTIONS)
    p.add_argument("--ready-timeout", type=float, default=600.0)
    p.add_argument("--json", type=Path, help="every figure to this file too")
    p.add_argument("--keep-logs", action="store_true", help="keep the servers' logs")
    args = p.parse_args(argv)
    args.config = args.config or [Config("now")]
    if len({c.name for c in args.config}) < len(args.config):
        p.error("two --config have the same name")
    args.clients = [int(c) for c in args.clients.split(",") if c]
    return args


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """On uvloop when installed (a lighter load generator), else asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()[0]
    sentences = Sentences(args.captions, args.seed)
    serve_args = argparse.Namespace(
        cache_dir=None, index=args.index, groundsearch=None, query_cache=4096
    )
    servers = [Server(serve_args, config) for config in args.config]
    phases: dict[tuple[int, str], list[Phase]] = {}
    try:
        for server in servers:
            server.start()
        for server in servers:
            sl.wait_ready(server.url, args.ready_timeout, server)
            print(f"{server.config.name}: ready on {server.url}", file=sys.stderr)
        for clients in args.clients:
            for r in range(args.rounds):
                for server in servers if r % 2 == 0 else servers[::-1]:
                    name = server.config.name
                    print(f"{name}: {clients} clients, {args.seconds:g} s", file=sys.stderr)
                    phase = run(measure(server, clients, args, sentences))
                    phases.setdefault((clients, name), []).append(phase)
                    print(json.dumps(pool([phase])), file=sys.stderr)
    finally:
        for server in servers:
            server.stop(args.keep_logs)
    rows = [pool(p) for p in phases.values()]
    command = "python " + shlex.join(["bench/overload.py", *(argv or sys.argv[1:])])
    m = machine()
    lines = [
        f"Machine: {m['cpu']}, {m['nproc']} cores, {m['memory_gib']} GiB, Python {m['python']}; "
        f"{dt.date.today()}; commit `{sl.git_commit()}`; load average before the run "
        f"{load_before:.1f}.",
        f"Command: `{command}`",
        "",
        *table(rows),
        "",
        *verdicts(rows),
    ]
    print("\n".join(lines))
    if args.json:
        each = [pool([p]) | {"round": i} for ps in phases.values() for i, p in enumerate(ps)]
        report = {"command": command, "machine": m, "rows": rows, "rounds": each}
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
