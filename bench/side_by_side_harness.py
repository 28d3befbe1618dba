"""Two versions of the service, served side by side, asked the same requests: same answers?

    python bench/side_by_side_harness.py --old-tree ../old --old-python ../old/.venv/bin/python
    python bench/side_by_side_harness.py --old-tree ../old --old-python ../old/.venv/bin/python \\
        --new-tree . --new-python .venv/bin/python --json side_by_side.json

A refactoring's check (issue 24): the old and the new code answer a fixed list of requests
identically. The command

1. builds ONE small gallery with the OLD tree's ``groundsearch index``: the first
   ``--photos`` (20) Flickr8k test photos with their captions (``$GROUNDSEARCH_DATA_DIR/
   flickr8k``), or the shipped sample gallery (``index --sample``) when Flickr8k is absent;
   the caption bank of ``/describe`` is a captions file written here (the captions of 20
   other test photos; the shipped sample captions without Flickr8k);
2. serves a copy of it with each tree (``PY -m groundsearch.cli serve`` with the tree as
   working directory), both at once: each server with a cache folder of its own (the GloVe
   pretrain linked from the old tree's cache, as tests/service/real_server.py does), the
   write token set, parsing in the server's process, one torch thread; it waits for
   ``/ready`` and for the caption bank to be loaded on both;
3. sends the same requests, in the same order, to both (one at a time, old then new):
   phase ``decoder`` (the shipped caption decoder on) — ``/search`` (ordinary texts, rare
   words, words only GloVe knows, cleaning variants, cached repeats, k values),
   ``/explain``, ``/paraphrase``, ``/describe`` (real photos in several formats with
   ``sentences`` both/generated/retrieved, beams, k; bad files: empty, not an image,
   truncated, an unsupported format, too many pixels, too many bytes), ``/arithmetic``
   (from an id: plus, minus, rerank, ``sentence``), ``/arithmetic/upload``,
   ``/images/{id}`` and ``/similar``, the errors (missing, empty, too long and unusable
   text, k out of range, unknown ids, wrong method, no such route, no or a wrong token)
   and gallery writes (``POST /gallery/images`` with captions, the same bytes again, then
   ``DELETE``; the ids a write answers are used by the later requests of that server);
   then phase ``no-decoder``: both servers started again (``GROUNDSEARCH_DECODER=none``,
   fresh copies of the gallery, each its own cache folder again, so the caption bank is
   loaded from that cache) for what changes without a decoder (501s, ``/describe`` with
   found captions only, ``/ready``);
4. compares each pair of answers: the status code, the ``Content-Type`` header and the
   body — JSON bodies parsed (so key order is not compared; types are: ``1`` is not
   ``1.0`` or ``true``) with the volatile fields below removed, every float compared
   exactly; other bodies (photos, the page, text) by SHA-256 and length. Two JSON bodies
   whose only differences are floats within a relative 1e-5 of each other are reported
   apart, as ``last-bits`` (a different summation order, not a different answer): still a
   difference.

Volatile values dropped before comparing (nothing else is):

- the numbers of ``timings_ms`` (``/search``, ``/describe``, ``/arithmetic``,
  ``/arithmetic/upload``, ``/paraphrase``, ``/explain``): wall-clock milliseconds of each
  stage, which differ between two runs of the same code. Its keys, the stages that ran,
  are kept and compared (sorted): they are not volatile (a query found in the query cache
  has no ``parse``; ``generate`` only where a sentence was written).

Nothing else in the answers turned out to be volatile: ``/ready`` carries no uptime or
process id, problems' ``instance`` is the request's path, ids are the same because both
galleries start as copies of one and get the same writes in the same order (three runs,
old against old and against new, gave the same 175 answers, to the byte of every photo).
Headers other than ``Content-Type`` (``date``, ``content-length``, ``etag`` and
``last-modified`` of photos, ``retry-after``) are not compared. Not sent: ``/metrics``
(latency histograms and counters: volatile throughout) and anything timed or concurrent
(429s depend on timing).

It prints a table (request, old status, new status, same?) and a last line ``N requests,
N identical, N different``; exits 1 if any answer differs (``last-bits`` included), 2 if a
server or the gallery could not be started. ``--json`` writes every request's detail:
both normalised answers and the paths where they differ. One run takes about 1.5 minutes on
the 2-core machine (one index run, four server starts, 175 requests).

Floats in the answers are rounded by the service's schemas (scores and shares to 6
decimals), so a difference in a computation's last bits shows only where it moves a
rounded value; ``last-bits`` catches those.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from PIL import Image, ImageOps

sys.path.insert(0, str(Path(__file__).parent))
from common import free_port

REPO = Path(__file__).resolve().parent.parent
TOKEN = "side-by-side-write-token-0123456789"
#: JSON keys (at any depth) whose values are volatile: only their keys are compared.
VOLATILE = frozenset({"timings_ms"})
#: Floats this close (relative) are reported as ``last-bits`` rather than ``different``.
LAST_BITS_REL = 1e-5
READY_TIMEOUT_S = 900
REQUEST_TIMEOUT_S = 300
MAX_TEXT_CHARS = 500  # the server's default limit (GROUNDSEARCH_MAX_TEXT_CHARS)
MAX_UPLOAD_BYTES = 10_000_000  # GROUNDSEARCH_MAX_UPLOAD_BYTES
BANK_PHOTOS = 20
#: Parameter values that stand for an id captured from an earlier answer.
CAPTURED = frozenset({"{a}", "{b}"})
PRETRAIN = "glove6b50d.pretrain.pt"
WHERE = "import groundsearch.service as s; print(s.__file__)"
ENSURE_PRETRAIN = (
    "from groundsearch.common.settings import get_settings\n"
    "from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain\n"
    "print(ensure_pretrain(get_settings().cache_dir))"
)


# --- requests ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One HTTP request. ``path`` may name ids captured from this server's earlier
    answers (``{added}``); ``capture`` keeps this answer's ``id`` under that name."""

    name: str
    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, bytes, str], ...] = ()  # field "image": (filename, bytes, type)
    captions: tuple[str, ...] = ()
    token: str | None = None
    content: bytes | None = None
    content_type: str | None = None
    capture: str | None = None

    def describe(self) -> str:
        query = "&".join(f"{k}={v[:40]!r}" if k == "text" else f"{k}={v}" for k, v in self.params)
        return f"{self.method} {self.path}" + (f"?{query}" if query else "")


def q(**params: object) -> tuple[tuple[str, str], ...]:
    """Query parameters; a list value is a repeated parameter, booleans are lower case."""
    out: list[tuple[str, str]] = []
    for key, value in params.items():
        for v in value if isinstance(value, list) else [value]:
            out.append((key, str(v).lower() if isinstance(v, bool) else str(v)))
    return tuple(out)


@dataclass(frozen=True)
class Photos:
    """Real photos: some in the gallery (``ids`` in it), some not."""

    gallery: list[bytes]
    fresh: list[bytes]
    ids: list[int]


def jpeg(photo: bytes) -> tuple[str, bytes, str]:
    return ("photo.jpg", photo, "image/jpeg")


def converted(photo: bytes, fmt: str, mode: str = "RGB", size: int | None = None) -> bytes:
    """The photo re-encoded (PNG, GIF, PPM, grayscale JPEG, a thumbnail…)."""
    image = ImageOps.exif_transpose(Image.open(io.BytesIO(photo))).convert(mode)
    if size:
        image = image.resize((size, size))
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def too_many_pixels() -> bytes:
    """A small PNG of 7000 x 7000 pixels (49 MP: over the 40 MP limit)."""
    out = io.BytesIO()
    Image.new("1", (7000, 7000)).save(out, "PNG")
    return out.getvalue()


def search_requests(ids: list[int]) -> list[Request]:
    texts = [
        "a black dog runs on the beach",
        "two dogs play in the snow",
        "A man wearing a helmet jumps on his bike near a beach.",
        "children playing in a fountain",
        "a girl in a pink dress",
        "a person climbing a rock wall",
        "a dog with a frisbee in its mouth",
        "crowd cheering at a parade at night",
        "a giraffe",
        "a giraffe eats leaves near a zebra",
        "broccoli on a plate",
        "a saxophone player on a stage",
        "surfer",
        "dog",
        "the of and",
        "a tiny kitten sleeps",
        "DOG RUNS ON THE BEACH!!!",
        "  a   black dog\truns on the beach  ",
        "a café by the street",
        "a dog 🐕 on green grass",
        "un chien noir court sur la plage",
        "a black dog runs on the beach",  # cached repeat
        "two dogs play in the snow",  # cached repeat
        "dog " * (MAX_TEXT_CHARS // 4),  # exactly at the limit
    ]
    out = [Request(f"search {i + 1}", "POST", "/search", q(text=t)) for i, t in enumerate(texts)]
    n = len(ids)
    for k in (1, 3, n, n + 5, 100):
        out.append(Request(f"search k={k}", "POST", "/search", q(text="a dog in the water", k=k)))
    return [
        *out,
        Request("search k=1 again", "POST", "/search", q(text="a dog in the water", k=1)),
        Request("search no text", "POST", "/search"),
        Request("search empty", "POST", "/search", q(text="")),
        Request("search blank", "POST", "/search", q(text="   ")),
        Request("search punctuation", "POST", "/search", q(text="!!! ??? ...")),
        Request("search control chars", "POST", "/search", q(text="\x01\x02\x03")),
        Request("search unknown words", "POST", "/search", q(text="qwxzv blorfing zzptk")),
        Request("search too long", "POST", "/search", q(text="a" * (MAX_TEXT_CHARS + 1))),
        Request("search k=0", "POST", "/search", q(text="a dog", k=0)),
        Request("search k=101", "POST", "/search", q(text="a dog", k=101)),
        Request("search k=-3", "POST", "/search", q(text="a dog", k=-3)),
        Request("search k=abc", "POST", "/search", q(text="a dog", k="abc")),
        Request("search wrong method", "GET", "/search", q(text="a dog")),
        Request("no such route", "POST", "/searches", q(text="a dog")),
    ]


def text_requests() -> list[Request]:
    explain = [
        "two dogs play in the snow",
        "A man wearing a helmet jumps on his bike near a beach.",
        "a giraffe eats leaves",
        "Students ride bikes at night.",
        "surfer",
    ]
    paraphrase = ["a black dog runs on the beach", "a giraffe", "children playing in a fountain"]
    return [
        *(Request(f"explain {i + 1}", "GET", "/explain", q(text=t)) for i, t in enumerate(explain)),
        Request("explain empty", "GET", "/explain", q(text="")),
        Request("explain unknown words", "GET", "/explain", q(text="qwxzv blorfing")),
        Request("explain too long", "GET", "/explain", q(text="b" * (MAX_TEXT_CHARS + 1))),
        Request("explain no text", "GET", "/explain"),
        Request("explain wrong method", "POST", "/explain", q(text="a dog")),
        *(
            Request(f"paraphrase {i + 1}", "POST", "/paraphrase", q(text=t))
            for i, t in enumerate(paraphrase)
        ),
        Request("paraphrase beam=1", "POST", "/paraphrase", q(text="a dog on grass", beam=1)),
        Request("paraphrase beam=5", "POST", "/paraphrase", q(text="a dog on grass", beam=5)),
        Request("paraphrase beam=0", "POST", "/paraphrase", q(text="a dog on grass", beam=0)),
        Request("paraphrase beam=11", "POST", "/paraphrase", q(text="a dog", beam=11)),
        Request("paraphrase unusable", "POST", "/paraphrase", q(text="!!!")),
    ]


def describe_requests(photos: Photos) -> list[Request]:
    g, f = photos.gallery, photos.fresh
    real = [
        ("gallery photo 1", jpeg(g[0]), q()),
        ("gallery photo 2", jpeg(g[1]), q()),
        ("new photo 1", jpeg(f[0]), q()),
        ("new photo 2", jpeg(f[1]), q()),
        ("new photo 1 generated", jpeg(f[0]), q(sentences="generated")),
        ("new photo 1 retrieved", jpeg(f[0]), q(sentences="retrieved")),
        ("new photo 2 beam=1", jpeg(f[1]), q(beam=1)),
        ("new photo 2 beam=5 k=10", jpeg(f[1]), q(beam=5, k=10)),
        ("gallery photo 1 k=1", jpeg(g[0]), q(k=1)),
        ("gallery photo 1 k=100", jpeg(g[0]), q(k=100)),
        ("png", ("photo.png", converted(f[0], "PNG"), "image/png"), q()),
        ("gif", ("photo.gif", converted(f[1], "GIF"), "image/gif"), q()),
        ("grey jpeg", ("grey.jpg", converted(f[0], "JPEG", "L"), "image/jpeg"), q()),
        ("8x8 jpeg", ("tiny.jpg", converted(f[1], "JPEG", size=8), "image/jpeg"), q()),
        ("wrong name and type", ("notes.txt", g[1], "text/plain"), q()),
    ]
    bad = [
        ("empty file", ("empty.jpg", b"", "image/jpeg"), q()),
        ("not an image", ("a.jpg", b"this is not an image\n" * 20, "image/jpeg"), q()),
        ("truncated jpeg", ("cut.jpg", f[0][: len(f[0]) // 3], "image/jpeg"), q()),
        ("ppm", ("photo.ppm", converted(f[0], "PPM"), "image/x-portable-pixmap"), q()),
        ("too many pixels", ("big.png", too_many_pixels(), "image/png"), q()),
        ("too many bytes", ("big.jpg", b"\0" * (MAX_UPLOAD_BYTES + 10), "image/jpeg"), q()),
        ("k=1000", jpeg(f[0]), q(k=1000)),
        ("k=0", jpeg(f[0]), q(k=0)),
        ("beam=11", jpeg(f[0]), q(beam=11)),
        ("sentences=all", jpeg(f[0]), q(sentences="all")),
    ]
    out = [
        Request(f"describe {name}", "POST", "/describe", params, files=(file,))
        for name, file, params in real + bad
    ]
    return [
        *out,
        Request("describe no image", "POST", "/describe"),
        Request(
            "describe not multipart",
            "POST",
            "/describe",
            content=b"--nothing here\r\n",
            content_type="multipart/form-data; boundary=xyz",
        ),
        Request("describe wrong method", "GET", "/describe"),
    ]


def arithmetic_requests(photos: Photos) -> list[Request]:
    a, b, n = photos.ids[0], photos.ids[1], photos.ids[-1]
    cases: list[tuple[str, Any]] = [
        ("id only", q(image_id=a)),
        ("minus dog plus man", q(image_id=a, minus="dog", plus="man")),
        ("minus dog plus children", q(image_id=b, minus="dog", plus="children", k=5)),
        ("plus snow", q(image_id=b, plus="snow")),
        ("minus water", q(image_id=n, minus="water", k=3)),
        ("two plus", q(image_id=a, plus=["a red ball", "green grass"], minus="a dog")),
        ("plus giraffe", q(image_id=a, plus="a giraffe", minus="dog")),
        ("rerank", q(image_id=a, minus="dog", plus="man", rerank=True)),
        ("rerank no phrases", q(image_id=b, rerank=True, k=4)),
        ("sentence", q(image_id=a, minus="dog", plus="man", sentence=True)),
        ("sentence rerank", q(image_id=b, plus="snow", sentence=True, rerank=True, k=2)),
        ("rerank k=1", q(image_id=n, plus="a ball", rerank=True, k=1)),
        ("sentence no phrases", q(image_id=n, sentence=True)),
        ("k=100", q(image_id=a, plus="beach", k=100)),
        ("unknown id", q(image_id=999999, plus="man")),
        ("id=0", q(image_id=0)),
        ("no id", q(plus="man")),
        ("plus unusable", q(image_id=a, plus="!!!")),
        ("minus unknown words", q(image_id=a, plus="man", minus="qwxzv blorf")),
        ("11 plus", q(image_id=a, plus=["dog"] * 11)),
        ("k=101", q(image_id=a, k=101)),
        ("rerank=maybe", q(image_id=a, rerank="maybe")),
    ]
    out = [Request(f"arithmetic {name}", "POST", "/arithmetic", p) for name, p in cases]
    f = photos.fresh
    uploads: list[tuple[str, bytes, Any]] = [
        ("no phrases", f[0], q()),
        ("minus dog plus man", f[0], q(minus="dog", plus="man")),
        ("plus snow rerank", f[1], q(plus="snow", rerank=True, k=5)),
        ("rerank k=1", f[0], q(rerank=True, k=1)),
        ("sentence", f[1], q(minus="dog", plus="a child", sentence=True)),
        ("gallery photo", photos.gallery[0], q(plus="water")),
        ("plus unusable", f[0], q(plus="???")),
        ("empty file", b"", q(plus="man")),
        ("not an image", b"GIF89a but not really", q()),
        ("k=0", f[0], q(k=0)),
    ]
    out += [
        Request(f"arithmetic/upload {name}", "POST", "/arithmetic/upload", p, files=(jpeg(data),))
        for name, data, p in uploads
    ]
    return out


def image_requests(photos: Photos) -> list[Request]:
    ids = photos.ids
    out = [Request(f"image {i}", "GET", f"/images/{i}") for i in (ids[0], ids[1], ids[-1])]
    for i, k in ((ids[0], None), (ids[1], 1), (ids[2], 3), (ids[-1], 100)):
        params = q(k=k) if k else ()
        out.append(Request(f"similar {i} k={k}", "GET", f"/images/{i}/similar", params))
    return [
        *out,
        Request("image unknown", "GET", "/images/999999"),
        Request("image 0", "GET", "/images/0"),
        Request("image abc", "GET", "/images/abc"),
        Request("image wrong method", "DELETE", f"/images/{ids[0]}"),
        Request("similar unknown", "GET", "/images/999999/similar"),
        Request("similar k=0", "GET", f"/images/{ids[0]}/similar", q(k=0)),
    ]


def write_requests(photos: Photos) -> list[Request]:
    f, g = photos.fresh, photos.gallery
    add = "/gallery/images"
    new = (jpeg(f[2]),)
    captions = ("A red kite flies over a sandy beach .", "People fly a kite by the sea .")
    return [
        Request("add no token", "POST", add, files=new, captions=captions),
        Request("add bad token", "POST", add, files=new, captions=captions, token="wrong-" + TOKEN),
        Request("add unusable caption", "POST", add, files=new, captions=("!!!",), token=TOKEN),
        Request("add 21 captions", "POST", add, files=new, captions=("a dog",) * 21, token=TOKEN),
        Request("add empty file", "POST", add, files=(jpeg(b""),), token=TOKEN),
        Request("ready before writes", "GET", "/ready"),
        Request("add photo", "POST", add, files=new, captions=captions, token=TOKEN, capture="a"),
        Request("search the added photo", "POST", "/search", q(text="a kite over the beach", k=3)),
        Request("image added", "GET", "/images/{a}"),
        Request("similar added", "GET", "/images/{a}/similar", q(k=3)),
        Request("describe after add", "POST", "/describe", files=new),
        Request(
            "add same bytes again",
            "POST",
            add,
            files=new,
            captions=("A kite in a blue sky .",),
            token=TOKEN,
        ),
        Request("add gallery photo", "POST", add, files=(jpeg(g[2]),), token=TOKEN),
        Request(
            "add png, blank caption",
            "POST",
            add,
            files=(("p.png", converted(f[3], "PNG"), "image/png"),),
            captions=("   ",),
            token=TOKEN,
            capture="b",
        ),
        Request("arithmetic from added", "POST", "/arithmetic", q(image_id="{a}", plus="dog")),
        Request("ready after adds", "GET", "/ready"),
        Request("delete no token", "DELETE", add + "/{a}"),
        Request("delete bad token", "DELETE", add + "/{a}", token="wrong-" + TOKEN),
        Request("delete added", "DELETE", add + "/{a}", token=TOKEN),
        Request("delete added again", "DELETE", add + "/{a}", token=TOKEN),
        Request("delete added png", "DELETE", add + "/{b}", token=TOKEN),
        Request("delete unknown", "DELETE", add + "/999999", token=TOKEN),
        Request("image deleted", "GET", "/images/{a}"),
        Request("search after delete", "POST", "/search", q(text="a kite over the beach", k=3)),
        Request("ready after deletes", "GET", "/ready"),
    ]


def decoder_requests(photos: Photos) -> list[Request]:
    """Phase ``decoder``: the shipped caption decoder on."""
    ops = [
        Request("health", "GET", "/health"),
        Request("ready", "GET", "/ready"),
        Request("openapi", "GET", "/openapi.json"),
        Request("page", "GET", "/"),
    ]
    return (
        ops
        + search_requests(photos.ids)
        + text_requests()
        + describe_requests(photos)
        + arithmetic_requests(photos)
        + image_requests(photos)
        + write_requests(photos)
    )


def no_decoder_requests(photos: Photos) -> list[Request]:
    """Phase ``no-decoder``: ``GROUNDSEARCH_DECODER=none``."""
    f, a = photos.fresh, photos.ids[0]
    return [
        Request("ready", "GET", "/ready"),
        Request("describe both", "POST", "/describe", files=(jpeg(f[0]),)),
        Request("describe retrieved", "POST", "/describe", q(sentences="retrieved", k=3),
                files=(jpeg(f[1]),)),
        Request("describe generated", "POST", "/describe", q(sentences="generated"),
                files=(jpeg(f[0]),)),
        Request("describe bad file", "POST", "/describe", files=(jpeg(b"not a photo"),)),
        Request("paraphrase", "POST", "/paraphrase", q(text="a dog runs")),
        Request("arithmetic", "POST", "/arithmetic", q(image_id=a, minus="dog", plus="man")),
        Request("arithmetic sentence", "POST", "/arithmetic", q(image_id=a, sentence=True)),
        Request("arithmetic/upload", "POST", "/arithmetic/upload", q(plus="snow"),
                files=(jpeg(f[1]),)),
        Request("arithmetic/upload sentence", "POST", "/arithmetic/upload", q(sentence=True),
                files=(jpeg(f[1]),)),
        Request("search", "POST", "/search", q(text="a giraffe", k=3)),
        Request("explain", "GET", "/explain", q(text="a giraffe")),
    ]  # fmt: skip


# --- answers and their comparison -------------------------------------------------------


def normalise(body: Any) -> Any:
    """``body`` with each ``VOLATILE`` key's value (at any depth) replaced by the sorted
    list of its own keys (a ``timings_ms`` by the stages that ran)."""
    if isinstance(body, dict):
        return {
            k: sorted(v) if k in VOLATILE and isinstance(v, dict) else normalise(v)
            for k, v in body.items()
        }
    if isinstance(body, list):
        return [normalise(v) for v in body]
    return body


def answer(status: int, content_type: str, content: bytes) -> dict[str, Any]:
    """What is compared of a response: status, content type and the body (JSON parsed
    and normalised; anything else as its SHA-256 and length)."""
    body: Any
    if "json" in content_type:
        try:
            body = normalise(json.loads(content))
        except ValueError:
            body = {"unparsable json sha256": hashlib.sha256(content).hexdigest()}
    else:
        body = {"sha256": hashlib.sha256(content).hexdigest(), "bytes": len(content)}
    return {"status": status, "content_type": content_type, "body": body}


def differences(old: Any, new: Any, path: str = "$") -> Iterator[tuple[str, Any, Any]]:
    """Every place where ``old`` and ``new`` differ: (JSON path, old value, new value)."""
    if type(old) is not type(new):
        yield path, old, new
    elif isinstance(old, dict):
        for key in sorted(old.keys() | new.keys(), key=str):
            if key not in old or key not in new:
                yield f"{path}.{key}", old.get(key, "<absent>"), new.get(key, "<absent>")
            else:
                yield from differences(old[key], new[key], f"{path}.{key}")
    elif isinstance(old, list):
        if len(old) != len(new):
            yield f"{path}.length", len(old), len(new)
        for i, (a, b) in enumerate(zip(old, new, strict=False)):
            yield from differences(a, b, f"{path}[{i}]")
    elif old != new and not (isinstance(old, float) and math.isnan(old) and math.isnan(new)):
        yield path, old, new


def last_bits(a: Any, b: Any) -> bool:
    """Two floats that differ by rounding only (relative ``LAST_BITS_REL``)."""
    return (
        isinstance(a, float)
        and isinstance(b, float)
        and math.isclose(a, b, rel_tol=LAST_BITS_REL, abs_tol=1e-12)
    )


def compare(old: dict[str, Any], new: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """``identical``, ``last-bits`` (only floats differ, each by rounding) or
    ``different``; with the differences (at most 20)."""
    found = list(differences(old, new))
    if not found:
        return "identical", []
    verdict = "last-bits" if all(last_bits(a, b) for _, a, b in found) else "different"
    return verdict, [{"path": p, "old": a, "new": b} for p, a, b in found[:20]]


# --- servers ----------------------------------------------------------------------------


def base_env() -> dict[str, str]:
    """The environment both sides start from: none of the caller's groundsearch paths."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for key in ("GROUNDSEARCH_INDEX_DIR", "GROUNDSEARCH_CHECKPOINT", "GROUNDSEARCH_MODEL_DIR"):
        env.pop(key, None)
    env |= {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    return env


def fresh_cache(folder: Path, pretrain: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / PRETRAIN
    if not link.exists():
        link.symlink_to(pretrain)
    return folder


@dataclass
class Side:
    """One tree and its interpreter, and the server it runs now."""

    label: str
    tree: Path
    python: Path
    cache: Path
    proc: subprocess.Popen[bytes] | None = None
    base: str = ""
    log: Path | None = None
    captured: dict[str, str] = field(default_factory=dict)

    def where(self) -> str:
        """Where this side's ``groundsearch.service`` is imported from (a sanity check)."""
        out = subprocess.run(
            [str(self.python), "-c", WHERE],
            cwd=self.tree,
            env=base_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()

    def start(self, gallery: Path, env: dict[str, str], log: Path) -> None:
        port = free_port()
        cmd = [str(self.python), "-m", "groundsearch.cli", "serve", "--port", str(port)]
        cmd += ["--index", str(gallery), "--log-level", "warning"]
        self.log, self.base, self.captured = log, f"http://127.0.0.1:{port}", {}
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.tree,
                env=env | {"GROUNDSEARCH_CACHE_DIR": str(self.cache)},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def ready(self, client: httpx.Client, deadline: float) -> dict[str, Any] | None:
        """``/ready``'s answer once the server and its caption bank are loaded; None
        while they are not."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:] if self.log else ""
            raise RuntimeError(f"the {self.label} server exited:\n{tail}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the {self.label} server was not ready in {READY_TIMEOUT_S} s")
        with contextlib.suppress(httpx.HTTPError):
            res = client.get(self.base + "/ready", timeout=5)
            if res.status_code == 200:
                body: dict[str, Any] = res.json()
                if not body["caption_bank"].startswith(("loading", "embedding")):
                    return body
        return None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: only its helpers
        self.proc = None

    def send(self, client: httpx.Client, req: Request) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {req.token}"} if req.token else {}
        if req.content_type:
            headers["Content-Type"] = req.content_type
        try:
            path = req.path.format(**self.captured)
            params = [(k, self.captured[v[1:-1]] if v in CAPTURED else v) for k, v in req.params]
        except KeyError as exc:  # an earlier write did not answer an id
            return {"status": 0, "content_type": "", "body": f"no id captured: {exc}"}
        files = [("image", f) for f in req.files] or None
        data = {"captions": list(req.captions)} if req.captions else None
        res = client.request(
            req.method,
            self.base + path,
            params=params,
            files=files,
            data=data,
            content=req.content,
            headers=headers,
            timeout=REQUEST_TIMEOUT_S,
        )
        got = answer(res.status_code, res.headers.get("content-type", ""), res.content)
        if req.capture and isinstance(got["body"], dict) and "id" in got["body"]:
            self.captured[req.capture] = str(got["body"]["id"])
        return got


def serve_both(
    sides: Sequence[Side], gallery: Path, env: dict[str, str], work: Path, phase: str
) -> dict[str, Any]:
    """Start every side on its own copy of ``gallery``; wait until all are ready."""
    for side in sides:
        copy = work / f"gallery-{phase}-{side.label}"
        shutil.copytree(gallery, copy)
        side.start(copy, env, work / f"server-{side.label}.log")
    deadline = time.monotonic() + READY_TIMEOUT_S
    ready: dict[str, Any] = {}
    with httpx.Client() as client:
        while len(ready) < len(sides):
            for side in sides:
                if side.label not in ready and (body := side.ready(client, deadline)):
                    ready[side.label] = body
            time.sleep(0.5)
    return ready


# --- the gallery ------------------------------------------------------------------------


def tiny_flickr(flickr: Path, root: Path, n: int) -> tuple[Photos, Path]:
    """A Flickr8k-layout folder of the first ``n`` test photos (linked) with their
    captions; the photos, and a captions file of the next ``BANK_PHOTOS`` photos' captions
    for the caption bank (the photos after those are the uploads)."""
    test = (flickr / "Flickr_8k.testImages.txt").read_text().split()
    chosen, bank = test[:n], test[n : n + BANK_PHOTOS]
    fresh = test[n + BANK_PHOTOS : n + BANK_PHOTOS + 4]
    (root / "Images").mkdir(parents=True)
    for name in chosen:
        (root / "Images" / name).symlink_to(flickr / "Images" / name)
    (root / "Flickr_8k.testImages.txt").write_text("\n".join(chosen) + "\n")
    for split in ("train", "dev"):
        (root / f"Flickr_8k.{split}Images.txt").write_text("")
    lines = (flickr / "Flickr8k.token.txt").read_text().splitlines()
    (root / "Flickr8k.token.txt").write_text(
        "\n".join(ln for ln in lines if ln.split("#", 1)[0] in chosen) + "\n"
    )
    bank_file = root.parent / "bank-captions.tsv"
    bank_file.write_text("\n".join(ln for ln in lines if ln.split("#", 1)[0] in bank) + "\n")
    read = [(flickr / "Images" / name).read_bytes() for name in chosen]
    photos = Photos(read, [(flickr / "Images" / name).read_bytes() for name in fresh], [])
    return photos, bank_file


def mirrored(photo: bytes) -> bytes:
    """A new photo (other bytes, other pixels) made from a gallery photo."""
    image = ImageOps.exif_transpose(Image.open(io.BytesIO(photo))).convert("RGB")
    image = image.transpose(Image.Transpose.ROTATE_90)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def build_gallery(
    old: Side, env: dict[str, str], work: Path, flickr: Path, n: int
) -> tuple[Path, Photos, Path]:
    """The gallery (indexed by the old tree), its photos, and the caption bank's file."""
    gallery = work / "gallery"
    cmd = [str(old.python), "-m", "groundsearch.cli", "index", "--index", str(gallery)]
    cmd += ["--quiet", "--workers", "0"]
    if (flickr / "Flickr8k.token.txt").is_file():
        photos, bank = tiny_flickr(flickr, work / "flickr8k", n)
        cmd += ["--flickr8k", "--data", str(work / "flickr8k"), "--split", "test"]
    else:  # the shipped sample gallery; uploads are rotated copies of its photos
        cmd += ["--sample"]
        photos, bank = Photos([], [], []), old.tree / "index" / "sample_captions.txt"
    index_cache = fresh_cache(work / "cache-index", (old.cache / PRETRAIN).resolve())
    subprocess.run(
        cmd, cwd=old.tree, env=env | {"GROUNDSEARCH_CACHE_DIR": str(index_cache)}, check=True
    )
    if not photos.gallery:
        files = sorted((index_cache / "sample-data" / "Images").iterdir())
        read = [p.read_bytes() for p in files]
        photos = Photos(read, [mirrored(p) for p in read[:4]], [])
    return gallery, photos, bank


# --- the run ----------------------------------------------------------------------------


def run_phase(
    sides: Sequence[Side], requests: Sequence[Request], phase: str, rows: list[dict[str, Any]]
) -> None:
    old, new = sides
    if not rows:
        print(f"{'#':>4}  {'request':60s} {'old':>4} {'new':>4}  same?")
    with httpx.Client() as client:
        for req in requests:
            a, b = old.send(client, req), new.send(client, req)
            verdict, diffs = compare(a, b)
            rows.append(
                {
                    "phase": phase,
                    "name": req.name,
                    "request": req.describe(),
                    "verdict": verdict,
                    "old": a,
                    "new": b,
                    "differences": diffs,
                }
            )
            same = {"identical": "yes", "last-bits": "NO (last bits)"}.get(verdict, "NO")
            name = f"{phase}: {req.name}"
            print(f"{len(rows):4d}  {name[:60]:60s} {a['status']:>4} {b['status']:>4}  {same}")
            for d in diffs[:3]:
                print(f"        {d['path']}: {clip(d['old'], d['new'])}")


def clip(old: Any, new: Any, width: int = 60) -> str:
    """Two differing values, each cut to ``width`` characters from a little before the
    first character where they differ."""
    a, b = str(old), str(new)
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), 0)
    start = max(0, min(first, len(a), len(b)) - 15)
    cut = slice(start, start + width)
    dots = "…" if start else ""
    return f"{dots}{a[cut]!r} | {dots}{b[cut]!r}"


def glove_pretrain(sides: Sequence[Side], env: dict[str, str]) -> Path:
    """The shared GloVe pretrain (built once in the user's cache), by the first tree
    whose code can say where it is."""
    for side in sides:
        out = subprocess.run(
            [str(side.python), "-c", ENSURE_PRETRAIN],
            cwd=side.tree,
            env=env,
            capture_output=True,
            text=True,
        )
        if out.returncode == 0:
            return Path(out.stdout.strip().splitlines()[-1])
    raise RuntimeError(f"no tree could build the GloVe pretrain:\n{out.stderr[-2000:]}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-tree", type=Path, required=True, help="the old checkout")
    ap.add_argument("--old-python", type=Path, required=True, help="its interpreter")
    ap.add_argument("--new-tree", type=Path, default=REPO, help="the new checkout (this one)")
    ap.add_argument("--new-python", type=Path, help="its interpreter (NEW_TREE/.venv/bin/python)")
    ap.add_argument("--photos", type=int, default=20, help="Flickr8k test photos in the gallery")
    ap.add_argument("--json", type=Path, help="write every request's detail here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, galleries)")
    args = ap.parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # the table as it is made
    data = Path(os.environ.get("GROUNDSEARCH_DATA_DIR", REPO.parent / "shared" / "data"))
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="side-by-side-"))
    env = base_env() | {
        "GROUNDSEARCH_DATA_DIR": str(data.resolve()),
        "GROUNDSEARCH_WRITE_TOKEN": TOKEN,
        "GROUNDSEARCH_PARSE_WORKERS": "0",
        "GROUNDSEARCH_BANK_PARSE_WORKERS": "1",
        "GROUNDSEARCH_TORCH_THREADS": "1",
    }
    old_tree, new_tree = args.old_tree.resolve(), args.new_tree.resolve()
    new_python = args.new_python or new_tree / ".venv" / "bin" / "python"
    sides = [
        Side("old", old_tree, args.old_python.absolute(), work / "cache-old"),
        Side("new", new_tree, new_python.absolute(), work / "cache-new"),
    ]
    rows: list[dict[str, Any]] = []
    try:
        pretrain = glove_pretrain(sides, env)
        for side in sides:
            fresh_cache(side.cache, pretrain)
            print(f"{side.label}: {side.python} runs {side.where()}")
        gallery, photos, bank = build_gallery(sides[0], env, work, data / "flickr8k", args.photos)
        env["GROUNDSEARCH_CAPTION_BANK"] = str(bank)
        for phase, decoder, make in (
            ("decoder", "default", decoder_requests),
            ("no-decoder", "none", no_decoder_requests),
        ):
            ready = serve_both(sides, gallery, env | {"GROUNDSEARCH_DECODER": decoder}, work, phase)
            ids = list(range(1, ready["old"]["images"] + 1))
            print(f"{phase}: ready after {time.monotonic() - started:.0f} s; old {ready['old']}")
            run_phase(sides, make(Photos(photos.gallery, photos.fresh, ids)), phase, rows)
            for side in sides:
                side.stop()
    except (RuntimeError, subprocess.CalledProcessError, httpx.HTTPError) as exc:
        print(f"side_by_side: {exc}", file=sys.stderr)
        return 2
    finally:
        for side in sides:
            side.stop()
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("identical", "last-bits")}
    different = len(rows) - counts["identical"]
    seconds = time.monotonic() - started
    if args.json:
        summary = {"requests": len(rows), **counts, "different": different, "seconds": seconds}
        trees = {"old": str(old_tree), "new": str(new_tree)}
        args.json.write_text(
            json.dumps({"summary": summary, "trees": trees, "requests": rows}, indent=1) + "\n"
        )
    bits = f" ({counts['last-bits']} only in floats' last bits)" if counts["last-bits"] else ""
    print(f"{len(rows)} requests, {counts['identical']} identical, {different} different{bits}")
    print(f"({seconds:.0f} s)")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
