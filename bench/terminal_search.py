"""``groundsearch search`` from a terminal: time to the first result from a cold start.

    python bench/terminal_search.py --index runs/g300            # a gallery on disk
    python bench/terminal_search.py --index runs/g300 --url http://127.0.0.1:8000

Each run is a new process (``groundsearch search TEXT --index G --timings``), as a
user's shell starts it; what it times:

* **first result**: from starting the process to its first line of output (the paths are
  printed together, then flushed), and **exit**: to the process's end;
* the command's own phases (``--timings``): ``imports`` (torch and FAISS), ``gallery``
  (opening it read-only, its search index from the snapshot), ``model`` (the checkpoint,
  the parser's files, the relevance model), ``glove`` (the concept channel's 400k-word
  table), ``parse`` (from the parse cache, or stanza's pipeline loaded and run),
  ``encode``, ``search``; ``startup`` is what comes before the command (the interpreter
  and the command line's imports): first result − the command's own time;
* **model load** = imports + model + glove: what loading the model costs this run.

Two kinds of query: a text parsed before (its tree in the disk parse cache: the usual
case for a repeated search) and a text never parsed (stanza's pipeline is loaded for
it). With ``--url``, the same text through a running server (``groundsearch.client``).
Also measured, in processes of their own: what the trims saved — the concept channel's
photo side built at load (torchvision's import, the classifier, 1,000 class vectors),
and the interpreter's teardown after the answer (what ending with ``os._exit`` skips).
Prints JSON and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import markdown_table

REPO = Path(__file__).resolve().parents[1]
PHASES = ("imports", "gallery", "model", "glove", "parse", "encode", "search")
ADJECTIVES = ["red", "small", "wet", "happy", "old", "striped", "tall", "muddy", "shiny"]
THINGS = ["dog", "boy", "girl", "man", "bike", "ball", "horse", "car", "kite", "boat"]
PLACES = ["beach", "park", "snow", "street", "lake", "field", "forest", "pool", "city"]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def new_texts(n: int, seed: int) -> list[str]:
    """Texts no one parsed before in this cache (a fresh combination and a counter)."""
    out = []
    for i in range(n):
        a, t, p = (ADJECTIVES[(seed + i) % 9], THINGS[(seed * 7 + i) % 10], PLACES[i % 9])
        out.append(f"a {a} {t} number {seed}{i} plays near the {p}")
    return out


def timed(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Run ``cmd``: seconds to its first output line and to its end, and its phases."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    first_s = time.perf_counter() - start
    rest = proc.stdout.read()
    err = proc.stderr.read()
    proc.wait()
    end_s = time.perf_counter() - start
    if proc.returncode != 0 or not first:
        raise SystemExit(f"{cmd} failed ({proc.returncode}): {err[-2000:]} {rest[-500:]}")
    out = {"first_result": first_s, "exit": end_s}
    line = next((x for x in err.splitlines() if x.startswith("timings (s):")), "")
    for name, value in re.findall(r"([a-z ]+?) ([0-9.]+)(?:,|;|$)", line.split(":", 1)[-1]):
        out[name.strip()] = float(value)
    if "command" in out:
        out["startup"] = first_s - out["command"]
        out["model_load"] = sum(out.get(p, 0.0) for p in ("imports", "model", "glove"))
    return out


def summary(runs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    keys = sorted({k for r in runs for k in r})
    return {
        k: {
            "median": round(statistics.median(r[k] for r in runs if k in r), 3),
            "min": round(min(r[k] for r in runs if k in r), 3),
            "max": round(max(r[k] for r in runs if k in r), 3),
        }
        for k in keys
    }


def probe(code: str, env: dict[str, str]) -> float:
    """Seconds a snippet reports (its last stdout line)."""
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return float(run.stdout.split()[-1])


EAGER_PHOTO_SIDE = """
import time
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.common.settings import get_settings
model = load_checkpoint(get_settings().default_checkpoint)
channel = model.concepts
start = time.perf_counter()
channel.class_mean  # the classifier, torchvision's class names, 1,000 GloVe phrase vectors
print(time.perf_counter() - start)
"""

TEARDOWN = """
import os, subprocess, sys, time
code = '''
import sys, time
from groundsearch.cli import main
main(sys.argv[1:])   # argv given: returns, and the interpreter ends as usual
sys.stdout.flush()
print(repr(time.time()), file=sys.stderr)
'''
p = subprocess.run([sys.executable, "-c", code, "search", TEXT, "--index", INDEX],
                   capture_output=True, text=True)
print(time.time() - float(p.stderr.strip().splitlines()[-1]))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--index", required=True, help="the gallery to search")
    ap.add_argument("--runs", type=int, default=7, help="processes per kind of query")
    ap.add_argument("--url", help="also through this running server (--url)")
    ap.add_argument("--cache", default="runs/terminal-search-cache", help="parse cache folder")
    ap.add_argument("--out", help="write the JSON here too")
    args = ap.parse_args()

    from groundsearch.common.settings import get_settings
    from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain

    cache = Path(args.cache).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    pretrain = cache / "glove6b50d.pretrain.pt"
    if not pretrain.exists():
        pretrain.symlink_to(ensure_pretrain(get_settings().cache_dir))
    env = {**os.environ, "GROUNDSEARCH_CACHE_DIR": str(cache)}
    exe = str(Path(sys.executable).with_name("groundsearch"))
    base = [exe, "search"]
    flags = ["--index", str(args.index), "-k", "10", "--timings", "--min-relevance", "0"]
    seed = int(time.time()) % 100000
    known = "a black dog runs on the beach"
    report: dict[str, object] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "gallery": str(args.index),
        "load_before": load(),
    }
    timed([*base, known, *flags], env)  # its parse into the cache
    runs: dict[str, list[dict[str, float]]] = {"parsed before": [], "never parsed": []}
    fresh = iter(new_texts(args.runs, seed))
    for _ in range(args.runs):  # interleaved: the same load for both
        runs["parsed before"].append(timed([*base, known, *flags], env))
        runs["never parsed"].append(timed([*base, next(fresh), *flags], env))
    if args.url:
        url_flags = ["--url", args.url, "-k", "10", "--min-relevance", "0"]
        runs["--url (a server)"] = [
            timed([*base, known, *url_flags], env) for _ in range(args.runs)
        ]
    report["runs"] = {k: summary(v) for k, v in runs.items()}
    teardown = TEARDOWN.replace("TEXT", repr(known)).replace("INDEX", repr(str(args.index)))
    report["trimmed"] = {
        "photo side built at load (s)": [round(probe(EAGER_PHOTO_SIDE, env), 3) for _ in range(3)],
        "interpreter teardown after the answer (s)": [
            round(probe(teardown, env), 3) for _ in range(3)
        ],
    }
    report["load_after"] = load()
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))


def table(report: dict) -> str:
    head = ["query", "first result", "exit", "startup", *PHASES, "model load"]
    rows = []
    for kind, s in report["runs"].items():
        cells = [f"{s[k]['median']:.2f}" if k in s else "–" for k in PHASES]
        start = f"{s['startup']['median']:.2f}" if "startup" in s else "–"
        load = f"{s['model_load']['median']:.2f}" if "model_load" in s else "–"
        first = s["first_result"]
        spread = f"**{first['median']:.2f}** ({first['min']:.2f}–{first['max']:.2f})"
        rows.append([kind, spread, f"{s['exit']['median']:.2f}", start, *cells, load])
    return "\n".join(markdown_table(head, rows))


if __name__ == "__main__":
    main()
