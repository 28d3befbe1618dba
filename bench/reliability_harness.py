"""Reliability suite of the HTTP service, one command: schema fuzzing, a bad-input matrix,
overload, memory under huge photos, a soak and the crash-safety tests.

    python bench/reliability_harness.py              # = make reliability: every phase (~45 min)
    python bench/reliability_harness.py --phases matrix,load --load-seconds 30
    python bench/reliability_harness.py --soak-minutes 1 --load-seconds 20 \\
        --st-max-examples 20                         # quick
    python bench/reliability_harness.py --url http://127.0.0.1:8000 --token TOKEN  # running server
    python bench/reliability_harness.py --json reliability.json --markdown docs/RELIABILITY.md

Without --url the script serves temporary copies of two galleries with `groundsearch serve`
(bench/service_load.py's Server: a fresh cache dir, no caption bank) and a random 32-character
GROUNDSEARCH_WRITE_TOKEN, so no gallery is modified: the shipped sample photos (built, or
brought up to date, in OUT_DIR/galleries by `groundsearch index --sample`) for schema and
matrix, which write; for load, memory and soak, --gallery, else the gallery `serve` uses by
default (~/.cache/groundsearch/gallery) when it is built, else Flickr8k test (`groundsearch
index --flickr8k --split test` into OUT_DIR/galleries: ~3 min the first time). With --url,
schema and matrix write to that server's gallery (the matrix removes the photos it added).

Phases (--phases, run in this order):
  schema  schemathesis (every check; examples, coverage, fuzzing, stateful; the repository's
          schemathesis.toml) on /openapi.json: test cases, failures by check, wall time;
          its log in OUT_DIR/schemathesis.
  matrix  bad inputs on every route that takes them: expected and actual status, problem
          details (application/problem+json), no traceback, one message for unusable text.
  load    --clients closed-loop clients for --load-seconds over a mix of routes: latency of
          admitted answers, 429 refusals and their latency, errors, throughput, /metrics.
  memory  --memory-clients concurrent /describe uploads of a 39.6-megapixel PNG,
          --memory-rounds times; the server's RSS sampled every 0.1 s.
  soak    --soak-minutes of the same mix at --soak-clients, and a 39.6 MP upload every
          --soak-upload-every s; RSS every 5 s: after warm-up, max, end, 30 s later.
  crash   pytest tests/service/test_crash_safety.py (SIGKILLed servers lose no write).

Each phase prints its Markdown section on stderr when done; the whole report (for
docs/RELIABILITY.md) goes to stdout at the end, and to --markdown; every figure to --json.
A missed target is reported, not raised: the exit status is 2 when a phase could not run,
1 with --strict when a target is missed, else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import io
import json
import math
import os
import random
import re
import secrets
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import service_load as sl

from common import machine, markdown_table, percentile

BIN = Path(sys.executable).parent
TITLES = {
    "schema": "Schema fuzzing (schemathesis)",
    "matrix": "Bad-input matrix",
    "load": "Mixed load and admission control",
    "memory": "Memory: concurrent 39.6-megapixel uploads",
    "soak": "Soak",
    "crash": "Crash safety",
}
PHASES = tuple(TITLES)
PROBLEM = "application/problem+json"
SEARCH_P99_MS, REFUSAL_MAX_MS, THROUGHPUT = 300.0, 10.0, 42.5  # the targets
PEAK_RSS_MB, SOAK_GROWTH_PCT = 1800.0, 10.0
MIX = {"search": 60, "describe": 15, "explain": 10, "arithmetic": 5, "similar": 5, "image": 5}
PHRASES = ["red", "a dog", "snow", "on the beach", "a child", "water", "grass", "running"]
BIG = (7680, 5160)  # 39.6 megapixels, under the 40,000,000-pixel limit
Fig = dict[str, Any]
Section = tuple[Fig, list[str]]  # a phase's figures and its Markdown lines


@dataclass
class Endpoint:
    """A server to test: URL, process id (for RSS), write token, /ready answer."""

    url: str
    pid: int | None
    token: str | None
    ready: dict
    how: str


@dataclass
class Hit:
    route: str
    t: float  # send time, perf_counter seconds
    ms: float
    status: int  # 0: no HTTP answer (timeout, connection error)
    retry_after: bool = False
    retry_after_s: float = 0.0


# --------------------------------------------------------------------------- helpers


def outcome(status: int) -> str:
    return "ok" if 200 <= status < 300 else "refused" if status == 429 else "error"


def target(what: str, goal: Any, result: Any, met: bool | None) -> dict:
    return {"what": what, "target": str(goal), "result": str(result), "met": met}


def mb(value: float | None) -> str:
    return f"{sl.fmt(value, 0)} MB"


def rss_mb(pid: int | None) -> float | None:
    usage = sl.tree_usage(pid) if pid else None
    return round(usage[0] / 1e6, 1) if usage else None


class RssSampler(sl.Sampler):
    """service_load's Sampler (RSS and CPU of the server's tree) at an interval of its own."""

    def __init__(self, pid: int | None, every_s: float) -> None:
        super().__init__(pid)
        self.every_s = every_s
        self.sample()
        self.start()

    def run(self) -> None:
        while not self.stop_event.wait(self.every_s):
            self.sample()

    def finish(self) -> list[tuple[float, float]]:
        """Stops; (perf_counter time, RSS MB) of every sample."""
        self.stop_event.set()
        self.join(5)
        return [(s[0], s[1] / 1e6) for s in self.samples if s[1] is not None]


def metrics(url: str) -> dict[str, float]:
    """/metrics as {'name{labels}': value}; {} when it cannot be read."""
    try:
        text = httpx.get(f"{url}/metrics", timeout=10, trust_env=False).text
    except httpx.HTTPError:
        return {}
    lines = [line.rpartition(" ") for line in text.splitlines() if line and line[0] != "#"]
    return {name: float(value) for name, _, value in lines}


def admission(m: dict[str, float]) -> dict[str, float]:
    kinds = ("groundsearch_refused_total", "groundsearch_queue_depth", "groundsearch_in_flight")
    return {k: v for k, v in m.items() if k.startswith(kinds)}


def fast_refusals(m: dict[str, float], le: str) -> tuple[int, int]:
    """(429 answers the server timed within ``le`` s, all 429 answers), from its histogram."""
    refusals = {k: v for k, v in m.items() if "request_seconds" in k and 'status="429"' in k}
    within = sum(v for k, v in refusals.items() if "_bucket" in k and f'le="{le}"' in k)
    return int(within), int(sum(v for k, v in refusals.items() if "_count" in k))


# --------------------------------------------------------------------------- test images


def png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def grey_png(width: int, height: int) -> bytes:
    """A black PNG of any size, compressed block by block: 20000×20000 is ~0.4 MB in the
    file and 400 MB decoded (a decompression bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    z, row = zlib.compressobj(9), b"\x00" * (1 + width)  # filter byte, then the pixels
    idat = [z.compress(row * min(1000, height - y)) for y in range(0, height, 1000)]
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grey
    body = chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(idat) + z.flush()) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def big_png(folder: Path) -> Path:
    """The 39.6-megapixel RGB PNG (smooth gradients: ~0.3 MB on the wire), made once."""
    path = folder / f"big-{BIG[0]}x{BIG[1]}.png"
    if not path.exists():
        g = Image.linear_gradient("L")
        bands = [b.resize(BIG) for b in (g, g.rotate(90), Image.radial_gradient("L"))]
        Image.merge("RGB", bands).save(path.with_suffix(".tmp"), "PNG", compress_level=9)
        path.with_suffix(".tmp").replace(path)
    return path


def photos(rng: random.Random) -> dict[str, tuple[bytes, str]]:
    """Upload inputs: bytes and the status the contract gives ('2xx': accepted)."""
    jpeg = io.BytesIO()
    Image.effect_noise((64, 64), 40).convert("RGB").save(jpeg, "JPEG", quality=90)
    bad_crc = bytearray(png(Image.effect_noise((32, 32), 40)))
    bad_crc[29] ^= 0xFF  # the IHDR chunk's CRC
    return {
        "1×1 PNG": (png(Image.new("RGB", (1, 1), (200, 40, 40))), "2xx"),
        "empty file": (b"", "422"),
        "random bytes": (rng.randbytes(4096), "415"),
        "text file": (b"a dog runs on the beach\n" * 50, "415"),
        "truncated JPEG": (jpeg.getvalue()[: len(jpeg.getvalue()) // 2], "422"),
        "PNG with a bad CRC": (bytes(bad_crc), "422|415"),
        "6400×6300 PNG (40.3 MP)": (grey_png(6400, 6300), "413"),
        "20000×20000 PNG bomb": (grey_png(20000, 20000), "413"),
        "10 MB + 1 byte": (b"\xff" * 10_000_001, "413"),
        "12 MB (refused by its length)": (b"\xff" * 12_000_000, "413"),
    }


# --------------------------------------------------------------------------- servers


def gallery_for(args: argparse.Namespace, kind: str, commands: list[str]) -> Path:
    """The gallery to serve a copy of for ``kind`` ('sample' or 'default'), built or
    brought up to date when it is this script's."""
    if kind == "default" and args.gallery:
        return args.gallery
    if kind == "default":
        from groundsearch.common.settings import get_settings

        if (get_settings().gallery_dir / "gallery.db").is_file():
            return get_settings().gallery_dir
    folder = args.out_dir / "galleries" / ("sample" if kind == "sample" else "flickr8k-test")
    preset = ["--sample"] if kind == "sample" else ["--flickr8k", "--split", "test"]
    cmd = [str(BIN / "groundsearch"), "index", *preset, "--index", str(folder), "--quiet"]
    commands.append(shlex.join(cmd))
    print(f"gallery: {shlex.join(cmd)}", file=sys.stderr, flush=True)
    log = args.out_dir / f"index-{folder.name}.log"
    for _ in range(2):  # the second time from scratch (e.g. one built by another checkpoint)
        with log.open("w") as out:
            if subprocess.run(cmd, stdout=out, stderr=out, cwd=sl.REPO).returncode == 0:
                return folder
        shutil.rmtree(folder, ignore_errors=True)
    raise RuntimeError(f"could not build {folder}: see {log}")


@contextlib.contextmanager
def serving(args: argparse.Namespace, kind: str, commands: list[str]) -> Iterator[Endpoint]:
    """The server of the phases of ``kind``: --url, or one on a temporary gallery copy."""
    if args.url:
        url = args.url.rstrip("/")
        local = httpx.URL(url).host in ("127.0.0.1", "localhost")
        pid = args.pid or (sl.listening_pid(httpx.URL(url).port or 80) if local else None)
        token = args.token or os.environ.get("GROUNDSEARCH_WRITE_TOKEN")
        yield Endpoint(url, pid, token, sl.wait_ready(url, args.ready_timeout, None), url)
        return
    source = gallery_for(args, kind, commands)
    tmp, server = Path(tempfile.mkdtemp(prefix="groundsearch-reliability-")), None
    try:
        shutil.copytree(source, tmp / "gallery")
        ns = argparse.Namespace(
            cache_dir=None, index=tmp / "gallery", groundsearch=None, query_cache=args.query_cache
        )
        server = sl.Server(ns)
        server.log_path.unlink(missing_ok=True)
        server.log_path = args.out_dir / f"server-{kind}.log"
        token = secrets.token_hex(16)
        env = dict(e.split("=", 1) for e in args.server_env)
        saved = dict(os.environ)
        os.environ.update(env | {"GROUNDSEARCH_WRITE_TOKEN": token})  # Server.start passes it on
        try:
            server.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        shown = ["GROUNDSEARCH_WRITE_TOKEN=<32 random chars>", "GROUNDSEARCH_CAPTION_BANK=none"]
        shown += [f"GROUNDSEARCH_QUERY_CACHE={args.query_cache}", "GROUNDSEARCH_CACHE_DIR=<temp>"]
        shown += [f"{k}={shlex.quote(v)}" for k, v in env.items()]
        commands.append(" ".join(shown) + " " + shlex.join(server.command()))
        started = time.monotonic()
        ready = sl.wait_ready(server.url, args.ready_timeout, server)
        print(f"ready after {time.monotonic() - started:.0f} s: {ready}", file=sys.stderr)
        how = f"`groundsearch serve` on a temporary copy of {source}, log {server.log_path}"
        yield Endpoint(server.url, server.proc and server.proc.pid, token, ready, how)
        server.check_alive()
    finally:
        if server is not None:
            server.stop(keep_log=True)
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- schema


def phase_schema(args: argparse.Namespace, ep: Endpoint, *, commands: list[str]) -> Section:
    out = args.out_dir / "schemathesis"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    config = sl.REPO / "schemathesis.toml"  # the project's settings (read from the cwd otherwise)
    cmd = [str(BIN / "schemathesis"), *(["--config-file", str(config)] if config.is_file() else [])]
    # every check runs by default; "--checks" would override the per-operation settings
    cmd += ["run", f"{ep.url}/openapi.json", "--no-color"]
    cmd += [f"--max-examples={args.st_max_examples}", f"--seed={args.st_seed}"]
    cmd += [f"--phases={args.st_phases}", f"--workers={args.st_workers}", "--request-timeout=60"]
    cmd += ["--generation-database=none", "--report=junit", f"--report-dir={out}"]
    cmd += [f"--max-time={args.st_max_time}"] if args.st_max_time else []
    cmd += ["-H", f"Authorization: Bearer {ep.token}"] if ep.token else []
    cmd += shlex.split(args.st_extra)
    shown = shlex.join(cmd)
    commands.append(shown.replace(ep.token, "$GROUNDSEARCH_WRITE_TOKEN") if ep.token else shown)
    log, t0 = out / "schemathesis.log", time.perf_counter()
    with log.open("w") as f:  # cwd: its .schemathesis/ folder lands in the out dir
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=out).returncode
    wall = time.perf_counter() - t0
    text = log.read_text(errors="replace")
    summary = text.rsplit("SUMMARY", 1)[-1] if "SUMMARY" in text else text[-3000:]
    counts = {w: int(n) for n, w in re.findall(r"(\d+) (generated|passed|skipped)", summary)}
    unique = re.search(r"(\d+) unique failures?", summary)
    block = summary.split("Failures:", 1)[1].split("\n\n", 1)[0] if "Failures:" in summary else ""
    by_check = {m[0]: int(m[1]) for m in re.findall(r"^\W*(.+?): (\d+)\s*$", block, re.M)}
    errors = re.search(r"Errors:\n(.*?)\n\n", summary, re.S)
    cases, failures = counts.get("generated"), int(unique[1]) if unique else sum(by_check.values())
    fig = {
        "rc": rc,
        "seconds": round(wall, 1),
        "cases": cases,
        "passed": counts.get("passed"),
        "skipped": counts.get("skipped"),
        "unique_failures": failures,
        "failures_by_check": by_check,
        "errors": errors[1].strip() if errors else None,
        "log": str(log),
        "summary": summary.strip()[-4000:],
    }
    fig["targets"] = [
        target("schema: test cases", "≥ 5,000", cases, (cases or 0) >= 5000),
        target("schema: failures", "0", failures, rc == 0 and failures == 0),
    ]
    lines = [
        f"{cases} test cases in {wall / 60:.1f} min (exit status {rc}): **{failures} unique "
        f"failures**; log `{log}`.",
        "",
        *markdown_table(
            ["check", "failures"], [[k, v] for k, v in by_check.items()] or [["–", 0]], escape=True
        ),
    ]
    if fig["errors"]:
        lines += ["", "Errors:", "", "```", fig["errors"][:2000], "```"]
    return fig, lines


# --------------------------------------------------------------------------- matrix


@dataclass
class Case:
    route: str
    input: str
    expected: str  # statuses, '|'-separated: the contract's first, then others accepted
    method: str
    path: str
    kw: dict
    check: Callable[[httpx.Response], str | None] | None = None


def problem_type(r: httpx.Response) -> str:
    with contextlib.suppress(ValueError, AttributeError):
        return str(r.json().get("type", ""))
    return ""


def unusable_type(r: httpx.Response) -> str | None:
    kind = problem_type(r)
    return f"type {kind!r}" if r.status_code == 404 and kind != "/problems/unusable-text" else None


def own_words(r: httpx.Response) -> str | None:
    pillow = any(w in r.text.lower() for w in ("decompression bomb", "dos attack"))
    return "Pillow's words in the detail" if pillow else None


def matrix_cases(image_id: int, token: str | None, rng: random.Random) -> list[Case]:
    cases: list[Case] = []

    def add(route: str, label: str, expected: str, request: str, **kw: Any) -> None:
        check, (method, path) = kw.pop("check", None), request.split(" ", 1)
        cases.append(Case(route, label, expected, method, path, kw, check))

    auth = {"Authorization": f"Bearer {token}"} if token else {}
    inputs = photos(rng)
    one = ("p.png", inputs["1×1 PNG"][0], "image/png")
    long, gallery = "a dog runs on the beach " * 25, "/gallery/images"
    texts = {  # label: text, status on the query routes, status as a caption
        "plain sentence": ("a dog runs on the beach", "200", "201"),
        "unicode": ("a dog 🐕 runs on the beach in Zürich — ça va", "200", "201"),
        "NUL inside a sentence": ("a dog\x00 runs on the beach", "200|422", "201|422"),
        "500 chars": (long[:500], "200", "201"),
        "501 chars": (long[:501], "422", "422"),
        "empty": ("", "404", "201|404|422"),  # a blank caption is dropped
        "whitespace only": ("  \t \n ", "404", "201|404|422"),
        "control characters only": ("\x01\x02\x1b\x7f", "404", "404|422"),
        "NUL only": ("\x00\x00", "404|422", "404|422"),
        "punctuation '!!!'": ("!!!", "404", "404|422"),
        "punctuation '?'": ("?", "404", "404|422"),
        "punctuation '.'": (".", "404", "404|422"),
        "unknown words": ("qwzxv blorft", "404", "404|422"),
    }
    for label, (text, query, caption) in texts.items():
        check = unusable_type if "404" in query else None
        add("search", label, query, "POST /search", params={"text": text}, check=check)
        add("explain", label, query, "GET /explain", params={"text": text}, check=check)
        for sign in ("plus", "minus"):
            params = {"image_id": image_id, sign: text}
            add(f"arithmetic {sign}", label, query, "POST /arithmetic", params=params, check=check)
        kw = {"files": {"image": one}, "data": {"captions": [text]}, "headers": auth}
        add("gallery add: caption", label, caption, f"POST {gallery}", check=check, **kw)
    kw = {"files": {"image": one}, "data": {"captions": ["a dog"] * 21}, "headers": auth}
    add("gallery add: caption", "21 captions", "422", f"POST {gallery}", **kw)
    uploads: dict[str, tuple[str, dict[str, Any], str]] = {
        "describe": ("POST /describe", {"params": {"k": 5}}, "200"),
        "arithmetic/upload": ("POST /arithmetic/upload", {"params": {"plus": "red"}}, "200"),
        "gallery add": (
            f"POST {gallery}",
            {"data": {"captions": ["a photo"]}, "headers": auth},
            "201",
        ),
    }
    for route, (request, base, ok) in uploads.items():
        for label, (data, expected) in inputs.items():
            check = own_words if expected == "413" and "PNG" in label else None
            files = {"image": ("upload.bin", data, "application/octet-stream")}
            add(
                route, label, expected.replace("2xx", ok), request, files=files, check=check, **base
            )
        files = {"image": ("p.txt", one[1], "text/plain")}
        add(route, "1×1 PNG sent as text/plain", ok, request, files=files, **base)
        add(route, "a JSON body, not multipart", "422|415", request, json={}, **base)
        add(route, "no `image` field (`photo`)", "422", request, files={"photo": one}, **base)
    with_k: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
        "search": ("POST /search", {"text": "a dog"}, {}),
        "describe": ("POST /describe", {}, {"files": {"image": one}}),
        "arithmetic": ("POST /arithmetic", {"image_id": image_id, "plus": "red"}, {}),
        "similar": (f"GET /images/{image_id}/similar", {}, {}),
    }
    for route, (request, params, kw) in with_k.items():
        for k, expected in (("0", "422"), ("101", "422"), ("abc", "422"), ("100", "200")):
            add(route, f"k={k}", expected, request, params=params | {"k": k}, **kw)
    ids: dict[str, tuple[Any, str]] = {"unknown id": (999_999_999, "404"), "id -1": (-1, "422|404")}
    ids |= {"id 2**70": (2**70, "422|404"), "id 'abc'": ("abc", "422")}
    for label, (i, expected) in ids.items():
        add("image", label, expected, f"GET /images/{i}")
        add("similar", label, expected, f"GET /images/{i}/similar")
        add("arithmetic", label, expected, "POST /arithmetic", params={"image_id": i, "k": 5})
        add("gallery delete", label, expected, f"DELETE {gallery}/{i}", headers=auth)
    add("arithmetic", "no image_id", "422", "POST /arithmetic", params={"plus": "red"})
    for label, headers, expected in (
        ("no token", {}, "401"),
        ("wrong token", {"Authorization": "Bearer " + "x" * 32}, "403"),
        ("no token after Bearer", {"Authorization": "Bearer"}, "401"),
        ("Basic scheme", {"Authorization": "Basic dXNlcjpwYXNz"}, "401"),
    ):
        add(
            "gallery add", label, expected, f"POST {gallery}", files={"image": one}, headers=headers
        )
        add("gallery delete", label, expected, f"DELETE {gallery}/{image_id}", headers=headers)
    add("unknown route", "GET /nope", "404", "GET /nope")
    add("search", "GET, not POST", "405", "GET /search", params={"text": "a dog"})
    return cases


def run_case(http: httpx.Client, case: Case) -> tuple[dict, httpx.Response | None]:
    row = {"route": case.route, "input": case.input, "expected": case.expected}
    try:
        r = http.request(case.method, case.path, **case.kw)
    except httpx.HTTPError as exc:
        return row | {"got": f"no answer ({type(exc).__name__})", "ok": False, "problems": []}, None
    problems = []
    if r.status_code >= 400:
        if not r.headers.get("content-type", "").startswith(PROBLEM):
            problems.append(f"content type {r.headers.get('content-type')!r}")
        try:
            body = r.json()
            if missing := {"type", "title", "status", "detail", "instance"} - set(body):
                problems.append(f"no {', '.join(sorted(missing))}")
        except (ValueError, TypeError):
            problems.append("not a JSON object")
    if "Traceback" in r.text:
        problems.append("a traceback in the body")
    if case.check and (problem := case.check(r)):
        problems.append(problem)
    ok = str(r.status_code) in case.expected.split("|") and not problems
    return row | {"got": r.status_code, "ok": ok, "problems": problems}, r


def matrix_row(r: dict) -> list:
    cells = [r[k] for k in ("route", "input", "expected", "got")]
    return [*cells, "yes" if r["ok"] else "**no**", "; ".join(map(str, r["problems"]))]


def phase_matrix(args: argparse.Namespace, ep: Endpoint) -> Section:
    auth = {"Authorization": f"Bearer {ep.token}"} if ep.token else {}
    rows: list[dict] = []
    added: set[int] = set()
    unusable: dict[str, set[str]] = {}  # route → the details of its unusable texts
    with httpx.Client(base_url=ep.url, timeout=2 * args.timeout, trust_env=False) as http:
        first = http.post("/search", params={"text": "a dog runs on the beach", "k": 1})
        image_id = (first.json().get("results") or [{"id": 1}])[0]["id"] if first.is_success else 1
        for case in matrix_cases(image_id, ep.token, random.Random(args.seed)):
            row, r = run_case(http, case)
            rows.append(row)
            if r is not None and r.status_code == 201 and isinstance(r.json().get("id"), int):
                added.add(r.json()["id"])
            if r is not None and problem_type(r) == "/problems/unusable-text":
                unusable.setdefault(case.route, set()).add(r.json().get("detail"))
        for i in sorted(added - {image_id}):  # leaves the gallery as it was
            path, kw = f"/gallery/images/{i}", {"headers": auth}
            case = Case("gallery delete", f"photo {i} added above", "200", "DELETE", path, kw)
            rows.append(run_case(http, case)[0])
    for route, messages in unusable.items():  # whatever the kind of unusable text
        row = {"route": route, "input": "every unusable text", "expected": "one detail"}
        rows.append(row | {"got": f"{len(messages)} distinct", "ok": len(messages) == 1})
        rows[-1]["problems"] = sorted(messages) if len(messages) > 1 else []
    bad = sum(not r["ok"] for r in rows)
    fig = {"rows": len(rows), "not_as_expected": bad, "table": rows}
    fig["unusable_details"] = {k: sorted(v) for k, v in unusable.items()}
    fig["targets"] = [
        target("matrix: rows as the contract says", len(rows), len(rows) - bad, not bad)
    ]
    header = ["route", "input", "expected", "got", "ok", "problems"]
    lines = [
        f"{len(rows)} rows, **{bad} not as expected**.",
        "",
        *markdown_table(header, map(matrix_row, rows), escape=True),
    ]
    return fig, lines


# --------------------------------------------------------------------------- traffic


class Traffic:
    """The load mix: each call picks a route by its share and makes its request."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.rng = random.Random(args.seed)
        self.queries = sl.load_queries(args.queries, args.seed)
        self.photos = sl.load_photos(args.data, args.photos)
        self.ids = [1]

    def next(self) -> tuple[str, str, str, dict]:
        rng = self.rng
        route, image_id = rng.choices(list(MIX), list(MIX.values()))[0], rng.choice(self.ids)
        if route in ("search", "explain"):
            params = {"text": rng.choice(self.queries)} | ({"k": 10} if route == "search" else {})
            return route, "POST" if route == "search" else "GET", f"/{route}", {"params": params}
        if route == "describe":
            name, data = rng.choice(self.photos)
            return route, "POST", "/describe", {"files": {"image": (name, data, "image/jpeg")}}
        if route == "arithmetic":
            params = {"image_id": image_id, "plus": rng.choice(PHRASES)}
            return route, "POST", "/arithmetic", {"params": params}
        suffix = "/similar" if route == "similar" else ""
        return route, "GET", f"/images/{image_id}{suffix}", {}

    async def find_ids(self, url: str, n: int = 20) -> None:
        """Photo ids from the answers to ``n`` searches (which warm the server up too)."""
        ids: set[int] = set()
        async with sl.client(url, 60) as http:
            for text in self.queries[:n]:
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                    r = await http.post("/search", params={"text": text, "k": 10})
                    ids.update(hit["id"] for hit in r.json()["results"])
        self.ids = sorted(ids) or [1]


async def send(http: httpx.AsyncClient, route: str, method: str, path: str, kw: dict) -> Hit:
    t, status, retry_after, wait = time.perf_counter(), 0, False, 0.0
    with contextlib.suppress(httpx.HTTPError):
        r = await http.request(method, path, **kw)
        status, retry_after = r.status_code, "retry-after" in r.headers
        with contextlib.suppress(ValueError):
            wait = float(r.headers.get("retry-after", 0))
    return Hit(route, t, 1000 * (time.perf_counter() - t), status, retry_after, wait)


async def closed_loop(
    url: str,
    clients: int,
    seconds: float,
    traffic: Traffic,
    timeout: float,
    backoff: bool = False,
) -> list[Hit]:
    """``clients`` clients, each sending its next request as soon as it is answered (with
    ``backoff``, after the ``Retry-After`` of a 429, as a well-behaved client does)."""
    deadline, hits = time.perf_counter() + seconds, []

    async def run() -> None:
        async with sl.client(url, timeout) as http:
            for _ in range(sl.MAX_REQUESTS_PER_CLIENT):
                if time.perf_counter() >= deadline:
                    return
                hits.append(await send(http, *traffic.next()))
                if backoff and hits[-1].status == 429:
                    await asyncio.sleep(min(hits[-1].retry_after_s, deadline - time.perf_counter()))

    await asyncio.gather(*(run() for _ in range(clients)))
    return hits


def route_stats(hits: list[Hit]) -> dict[str, dict]:
    out = {}
    for route in [*sorted({h.route for h in hits}), "all"]:
        hs = [h for h in hits if route in ("all", h.route)]
        ok = [h.ms for h in hs if outcome(h.status) == "ok"]
        refused = [h.ms for h in hs if h.status == 429]
        errors = Counter(str(h.status) for h in hs if outcome(h.status) == "error")
        out[route] = {
            "requests": len(hs),
            "admitted": len(hs) - len(refused),
            "ok": len(ok),
            "p50_ms": percentile(ok, 50, digits=1),
            "p99_ms": percentile(ok, 99, digits=1),
            "refused": len(refused),
            "refused_p50_ms": percentile(refused, 50, digits=1),
            "refused_p99_ms": percentile(refused, 99, digits=1),
            "refused_max_ms": percentile(refused, 100, digits=1),
            "refused_without_retry_after": sum(h.status == 429 and not h.retry_after for h in hs),
            "errors": dict(sorted(errors.items())),
        }
    return out


def routes_table(stats: dict[str, dict]) -> list[str]:
    def ms(s: dict, *keys: str) -> str:
        return " / ".join(sl.fmt(s[k]) for k in keys)

    rows = []
    for r, s in stats.items():
        errors = ", ".join(f"{k}×{v}" for k, v in s["errors"].items()) or "0"
        refusals = ms(s, "refused_p50_ms", "refused_p99_ms", "refused_max_ms")
        name = f"`{r}`" if r != "all" else "**all**"
        rows.append([name, s["requests"], s["admitted"], ms(s, "p50_ms", "p99_ms"), s["refused"]])
        rows[-1] += [refusals, errors]
    header = ["route", "requests", "admitted", "2xx p50 / p99 ms", "429", "429 p50 / p99 / max ms"]
    return markdown_table([*header, "errors"], rows, escape=True)


# --------------------------------------------------------------------------- load


async def phase_load(args: argparse.Namespace, ep: Endpoint, traffic: Traffic) -> Section:
    sampler = RssSampler(ep.pid, 0.2)
    t0, cpu0 = time.perf_counter(), time.process_time()
    backoff = args.load_clients == "backoff"
    hits = await closed_loop(
        ep.url, args.clients, args.load_seconds, traffic, args.timeout, backoff
    )
    wall = time.perf_counter() - t0
    loadgen = round((time.process_time() - cpu0) / wall, 2)
    sampler.finish()
    stats, m = route_stats(hits), metrics(ep.url)
    total, search = stats["all"], stats.get("search", {})
    kind = r'.*kind="(\w+)".*'
    refused = {re.sub(kind, r"\1", k): int(v) for k, v in m.items() if "refused_total{" in k}
    fast = fast_refusals(m, str(REFUSAL_MAX_MS / 1000))
    by_kind = ", ".join(f"{k} {v}" for k, v in refused.items()) or "–"
    fig = {
        "clients": args.clients,
        "clients_wait_retry_after": backoff,
        "seconds": round(wall, 1),
        "throughput_2xx_per_s": round(total["ok"] / wall, 2),
        "answers_per_s": round(total["requests"] / wall, 2),
        "routes": stats,
        "admission_metrics": admission(m),
        "refused_total": refused,
        "server_429_within_10ms_of_all": fast,
        "loadgen_cpu_cores": loadgen,
        **sampler.window(t0, t0 + wall),
    }
    p99, worst, rate = search.get("p99_ms"), total["refused_max_ms"], fig["throughput_2xx_per_s"]
    n_errors = sum(total["errors"].values())
    p99_ok, worst_ok = p99 is not None and p99 <= SEARCH_P99_MS, (worst or 0) <= REFUSAL_MAX_MS
    limit, fast_text = f"≤ {REFUSAL_MAX_MS:g} ms", f"{fast[0]} of {fast[1]}"
    fig["targets"] = [
        target("load: `/search` admitted p99", f"≤ {SEARCH_P99_MS:g} ms", f"{p99} ms", p99_ok),
        target("load: slowest 429, client-timed", limit, f"{worst} ms", worst_ok),
        target(f"load: 429s the server timed {limit}", "all", fast_text, fast[0] == fast[1]),
        target("load: throughput", f"≥ {THROUGHPUT:g} 2xx/s", f"{rate} 2xx/s", rate >= THROUGHPUT),
        target("load: errors (neither 2xx nor 429)", "0", n_errors, n_errors == 0),
    ]
    mix = ", ".join(f"{v}% `{k}`" for k, v in MIX.items())
    lines = [
        f"{args.clients} closed-loop clients "
        f"({'waiting Retry-After after a 429' if backoff else 'retrying at once after a 429'})"
        f" for {wall:.0f} s; mix {mix} (queries of "
        f"`bench/queries.txt` drawn at random, so repeats hit the query cache; "
        f"{len(traffic.photos)} Flickr8k test photos). **{rate} 2xx/s**, "
        f"{fig['answers_per_s']} answers/s in all. CPU in cores: server "
        f"{fig.get('server_cpu_cores', '–')}, load generator {loadgen}, machine "
        f"{fig.get('machine_cpu_cores', '–')}; server RSS peak {fig.get('rss_peak_mb', '–')} MB.",
        "",
        *routes_table(stats),
        "",
        f"`/metrics` at the end: `groundsearch_refused_total` {by_kind}; 429 answers "
        f"the server timed {limit} (its request histogram): {fast_text}; 429 without "
        f"`Retry-After`: {total['refused_without_retry_after']}.",
    ]
    return fig, lines


# --------------------------------------------------------------------------- memory


async def upload_big(http: httpx.AsyncClient, data: bytes) -> Hit:
    kw = {"params": {"k": 5}, "files": {"image": ("big.png", data, "image/png")}}
    return await send(http, "describe 39.6 MP", "POST", "/describe", kw)


async def phase_memory(args: argparse.Namespace, ep: Endpoint) -> Section:
    data, before = big_png(args.out_dir).read_bytes(), rss_mb(ep.pid)
    sampler, rounds, statuses = RssSampler(ep.pid, 0.1), [], Counter[str]()

    async def one() -> Hit:
        async with sl.client(ep.url, 4 * args.timeout) as http:
            return await upload_big(http, data)

    for _ in range(args.memory_rounds):
        t0 = time.perf_counter()
        hits = await asyncio.gather(*(one() for _ in range(args.memory_clients)))
        seconds, answers = round(time.perf_counter() - t0, 1), Counter(str(h.status) for h in hits)
        p50 = percentile([h.ms for h in hits if h.status == 200], 50, digits=1)
        rounds.append({"seconds": seconds, "statuses": dict(answers), "ok_p50_ms": p50})
        statuses.update(answers)
    await asyncio.sleep(5)
    peak = max((mb for _, mb in sampler.finish()), default=None)
    peak, after = peak and round(peak, 1), rss_mb(ep.pid)
    fig = {
        "png_bytes": len(data),
        "pixels": BIG[0] * BIG[1],
        "clients": args.memory_clients,
        "rounds": rounds,
        "statuses": dict(statuses),
        "refused_429": statuses.get("429", 0),
        "rss_before_mb": before,
        "rss_peak_mb": peak,
        "rss_after_5s_mb": after,
    }
    n_errors = sum(v for k, v in statuses.items() if k not in ("200", "429"))
    got = ", ".join(f"{k}×{v}" for k, v in sorted(statuses.items()))
    peak_ok = None if peak is None else peak <= PEAK_RSS_MB
    fig["targets"] = [
        target("memory: peak RSS, 39.6 MP uploads", f"≤ {PEAK_RSS_MB:g} MB", mb(peak), peak_ok),
        target("memory: answers neither 200 nor 429", "0", n_errors, n_errors == 0),
    ]
    lines = [
        f"{args.memory_rounds} × {args.memory_clients} concurrent `/describe` uploads of "
        f"a {BIG[0]}×{BIG[1]} RGB PNG ({len(data) / 1e6:.2f} MB on the wire, "
        f"{fig['pixels'] / 1e6:.1f} MP); the server's RSS (process tree) every 0.1 s.",
        "",
        *markdown_table(
            ["RSS before", "peak", "5 s after", "statuses", "429 (admission control)"],
            [[mb(before), f"**{mb(peak)}**", mb(after), got, fig["refused_429"]]],
            escape=True,
        ),
    ]
    return fig, lines


# --------------------------------------------------------------------------- soak


async def phase_soak(args: argparse.Namespace, ep: Endpoint, traffic: Traffic) -> Section:
    seconds = args.soak_minutes * 60
    warm_s = min(120.0, seconds / 4)  # 2 minutes, or a quarter of a shorter soak
    data, sampler, big = big_png(args.out_dir).read_bytes(), RssSampler(ep.pid, 5.0), []
    t0 = time.perf_counter()

    async def big_uploads() -> None:
        async with sl.client(ep.url, 4 * args.timeout) as http:
            while time.perf_counter() + args.soak_upload_every < t0 + seconds:
                await asyncio.sleep(args.soak_upload_every)
                big.append(await upload_big(http, data))

    loop = closed_loop(ep.url, args.soak_clients, seconds, traffic, args.timeout)
    hits = (await asyncio.gather(loop, big_uploads()))[0] + big
    t_end = time.perf_counter()
    sampler.sample()
    await asyncio.sleep(30)
    sampler.sample()
    samples = sampler.finish()

    def rss_from(t: float) -> float | None:
        return next((round(v, 1) for ts, v in samples if ts >= t), None)

    warm, end, after = rss_from(t0 + warm_s), rss_from(t_end), rss_from(t_end + 30)
    peak = max((v for ts, v in samples if ts <= t_end), default=None)
    growth = round(100 * (end - warm) / warm, 1) if warm and end else None
    minutes = []
    for i in range(math.ceil(seconds / 60)):
        a, b = t0 + 60 * i, min(t0 + 60 * (i + 1), t_end)
        kinds = Counter(outcome(h.status) for h in hits if a <= h.t < b)
        rss = [v for ts, v in samples if a <= ts <= b]
        counts = {"requests": kinds.total()} | {k: kinds[k] for k in ("ok", "refused", "error")}
        minutes.append({"minute": i + 1, "rss_mb": round(rss[-1], 1) if rss else None} | counts)
    stats = route_stats(hits)
    fig = {
        "minutes": args.soak_minutes,
        "clients": args.soak_clients,
        "warmup_s": warm_s,
        "rss_after_warmup_mb": warm,
        "rss_max_mb": peak and round(peak, 1),
        "rss_end_mb": end,
        "rss_30s_after_mb": after,
        "growth_pct": growth,
        "throughput_2xx_per_s": round(stats["all"]["ok"] / (t_end - t0), 2),
        "routes": stats,
        "per_minute": minutes,
        "admission_metrics": admission(metrics(ep.url)),
    }
    n_errors = sum(stats["all"]["errors"].values())
    per_minute = [list(m.values()) for m in minutes]
    growth_ok = None if growth is None else growth <= SOAK_GROWTH_PCT
    fig["targets"] = [
        target(
            "soak: RSS, end vs after warm-up", f"≤ +{SOAK_GROWTH_PCT:g}%", f"{growth}%", growth_ok
        ),
        target("soak: errors (neither 2xx nor 429)", "0", n_errors, n_errors == 0),
    ]
    lines = [
        f"{args.soak_minutes:g} min of {args.soak_clients} closed-loop clients (the load mix) and "
        f"a {BIG[0] * BIG[1] / 1e6:.1f} MP `/describe` upload every {args.soak_upload_every:g} s: "
        f"{fig['throughput_2xx_per_s']} 2xx/s. Server RSS after warm-up ({warm_s:.0f} s) "
        f"{mb(warm)}, max {mb(peak)}, end of the traffic {mb(end)}, 30 s later {mb(after)}: "
        f"**{sl.fmt(growth)}% at the end vs after warm-up**.",
        "",
        *routes_table(stats),
        "",
        *markdown_table(
            ["minute", "RSS MB", "requests", "2xx", "429", "errors"], per_minute, escape=True
        ),
    ]
    return fig, lines


# --------------------------------------------------------------------------- crash


def phase_crash(args: argparse.Namespace, commands: list[str]) -> Section:
    cmd = [str(BIN / "pytest"), "-q", "tests/service/test_crash_safety.py"]
    cmd += ["-p", "no:cacheprovider"]
    commands.append(shlex.join(cmd))
    log, t0 = args.out_dir / "crash-safety.log", time.perf_counter()
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=f, cwd=sl.REPO, start_new_session=True)
        try:
            rc = proc.wait(args.crash_timeout)
        finally:
            if proc.poll() is None:  # timed out or interrupted: the servers it started go too
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    wall = time.perf_counter() - t0
    last = (log.read_text(errors="replace").strip().splitlines() or [""])[-1].strip("= ")
    counts = {w.rstrip("s"): int(n) for n, w in re.findall(r"(\d+) (passed|failed|errors?)", last)}
    fig = {"rc": rc, "seconds": round(wall, 1), "log": str(log), "summary": last}
    fig |= {"passed": 0, "failed": 0, "error": 0} | counts
    ok = rc == 0 and fig["passed"] > 0
    fig["targets"] = [target("crash safety tests", "all pass", last, ok)]
    shown = shlex.join(["pytest", *cmd[1:]])
    return fig, [f"`{shown}`: **{last}** ({wall / 60:.1f} min); log `{log}`."]


# --------------------------------------------------------------------------- main


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        f"Machine: {m['cpu']}, {m['nproc']} cores, {m['memory_gib']} GiB RAM, Python "
        f"{m['python']}; {report['date']}; commit `{report['commit']}`; "
        f"{report['seconds'] / 60:.1f} min in all. The load generator runs on the same cores.",
        "",
        "Commands:",
        "",
        "```",
        *report["commands"],
        "```",
        "",
        *markdown_table(
            ["target", "goal", "result", "met"],
            [[t["what"], t["target"], t["result"], sl.met(t["met"])] for t in report["targets"]],
            escape=True,
        ),
    ]
    for name, section in report["sections"].items():
        lines += ["", f"## {TITLES[name]}", "", *section]
    return "\n".join(lines) + "\n"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = ap.add_argument
    add("--url", help="a running server (default: start `groundsearch serve`)")
    add("--pid", type=int, help="with --url: the server's pid, for RSS (default: by its port)")
    add("--token", help="with --url: its write token (default: $GROUNDSEARCH_WRITE_TOKEN)")
    add("--phases", default=",".join(PHASES), help="comma-separated (default: all)")
    out = sl.REPO / "runs" / "reliability"
    add("--out-dir", type=Path, default=out, help="logs, galleries, images (runs/reliability)")
    add("--gallery", type=Path, help="the gallery (copied) for load, memory and soak")
    add("--data", type=Path, default=sl.DEFAULT_DATA, help="Flickr8k folder")
    add("--queries", type=Path, default=sl.QUERIES)
    add("--photos", type=int, default=100, help="Flickr8k test photos for /describe")
    add("--query-cache", type=int, default=4096, help="GROUNDSEARCH_QUERY_CACHE of the servers")
    env = "environment of the started servers, e.g. GROUNDSEARCH_CNN_QUEUE=4"
    add("--server-env", action="append", default=[], metavar="KEY=VALUE", help=env)
    add("--ready-timeout", type=float, default=900, help="seconds to wait for /ready")
    add("--timeout", type=float, default=30, help="seconds per request")
    add("--seed", type=int, default=0)
    add("--st-max-examples", type=int, default=500, help="schemathesis: per operation")
    add("--st-seed", type=int, default=0)
    add("--st-workers", type=int, default=2)
    add("--st-phases", default="examples,coverage,fuzzing,stateful")
    add("--st-max-time", type=int, help="schemathesis: time budget, seconds")
    add("--st-extra", default="", help="more schemathesis options, e.g. '--exclude-checks=…'")
    add("--clients", type=int, default=32, help="load: closed-loop clients")
    add(
        "--load-clients",
        choices=["backoff", "eager"],
        default="backoff",
        help="load: after a 429 a client waits its Retry-After (backoff) or sends at once",
    )
    add("--load-seconds", type=float, default=120)
    add("--memory-clients", type=int, default=16)
    add("--memory-rounds", type=int, default=3)
    add("--soak-minutes", type=float, default=30)
    add("--soak-clients", type=int, default=8)
    add("--soak-upload-every", type=float, default=30, help="seconds between 39.6 MP uploads")
    add("--crash-timeout", type=float, default=1800, help="seconds")
    add("--json", type=Path, help="write every figure here")
    add("--markdown", type=Path, help="write the report here (e.g. docs/RELIABILITY.md)")
    add("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if unknown := set(args.phases) - set(PHASES):
        ap.error(f"unknown phases {sorted(unknown)} (of {', '.join(PHASES)})")
    if any("=" not in e for e in args.server_env):
        ap.error("--server-env takes KEY=VALUE")
    return args


def main() -> int:
    args = parse_args()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # unwind: servers are stopped
        signal.signal(sig, signal.default_int_handler)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    command = shlex.join(["python", *sys.argv])
    t0, commands = time.perf_counter(), [command.replace(args.token or "\0", "$TOKEN")]
    report: dict = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": sl.git_commit(),
        "machine": machine(),
        "commands": commands,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "servers": {},
        "phases": {},
        "sections": {},
        "could_not_run": {},
    }

    def record(name: str, section: Section) -> None:
        report["phases"][name], report["sections"][name] = section
        print(f"\n## {TITLES[name]}\n\n" + "\n".join(section[1]) + "\n", file=sys.stderr)

    def failed(name: str, exc: BaseException) -> None:
        traceback.print_exc()
        report["could_not_run"][name] = message = f"{type(exc).__name__}: {exc}"
        record(name, ({"error": message}, [f"**Could not run**: {message}"]))

    def attempt(name: str, phase: Callable[[], Section]) -> None:
        print(f"— {name} …", file=sys.stderr, flush=True)
        try:
            record(name, phase())
        except (Exception, SystemExit) as exc:  # reported; the other phases still run
            failed(name, exc)

    def group(kind: str, phases: dict[str, Callable[[Endpoint], Section]]) -> None:
        wanted = [name for name in phases if name in args.phases]
        try:
            if wanted:
                with serving(args, kind, commands) as ep:
                    report["servers"][kind] = {"how": ep.how, "pid": ep.pid, **ep.ready}
                    for name in wanted:
                        attempt(name, partial(phases[name], ep))
        except (Exception, SystemExit) as exc:  # the gallery or the server (SystemExit)
            for name in wanted:
                if name not in report["phases"]:
                    failed(name, exc)

    def traffic(phase: Callable[..., Any]) -> Callable[[Endpoint], Section]:
        async def run(ep: Endpoint) -> Section:
            mix = Traffic(args)
            await mix.find_ids(ep.url)
            return await phase(args, ep, mix)

        return lambda ep: asyncio.run(run(ep))

    schema, matrix = partial(phase_schema, args, commands=commands), partial(phase_matrix, args)
    group("sample", {"schema": schema, "matrix": matrix})
    memory = lambda ep: asyncio.run(phase_memory(args, ep))  # noqa: E731
    group("default", {"load": traffic(phase_load), "memory": memory, "soak": traffic(phase_soak)})
    if "crash" in args.phases:
        attempt("crash", lambda: phase_crash(args, commands))
    report["seconds"] = round(time.perf_counter() - t0, 1)
    report["targets"] = [t for fig in report["phases"].values() for t in fig.get("targets", [])]
    text = "# Reliability\n\n" + markdown(report)
    del report["sections"]
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    if args.markdown:
        args.markdown.write_text(text)
    print("\n" + text)
    if report["could_not_run"]:
        return 2
    return 1 if args.strict and any(t["met"] is False for t in report["targets"]) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
