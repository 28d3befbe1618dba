"""The kinds of FAISS index a gallery can search with, and how each is made.

* ``flat``: exact inner product, linear in the gallery.
* ``hnsw``: a graph over the vectors (M=32), nearly constant time.
* ``ivfpq``: an IVF of PQ codes, memory-mapped, with an exact re-rank of the best
  ``k × k_factor`` from float16 (or 8-/4-bit) copies; trained on a sample, then sealed.
* ``ivfopq``: for short disks: the same behind a learned rotation (OPQ), PQ codes only.

``choose_kind`` is the rule for ``auto`` (docs/BENCHMARKS.md, "Scale", "Vector size").
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import faiss

from groundsearch.index.search.mapped_files import advise_random

#: FAISS, untyped: its stubs lack the search-parameter classes' keywords and attributes.
FAISS: Any = faiss
INDEX_KINDS = ("flat", "hnsw", "ivfpq", "ivfopq")
#: The kinds trained on a sample, built in shards and served from disk.
COMPRESSED = ("ivfpq", "ivfopq")
#: The gallery's kind when it picks by size.
AUTO = "auto"
HNSW_M = 32
#: ``auto`` uses an exact index up to this many vectors…
EXACT_UP_TO = 200_000
#: … and the compressed one from this many (between them: hnsw).
COMPRESSED_FROM = 2_000_000


#: The re-rank stores of ``ivfpq``: bytes a ``d``-d vector takes in each.
STORES = {"fp16": lambda d: 2 * d, "sq8": lambda d: d, "sq4": lambda d: (d + 1) // 2}


def store_bytes(dim: int, rerank: str) -> int:
    """Bytes a ``dim``-d vector takes in an ``ivfpq`` re-rank store ``rerank``."""
    if rerank not in STORES:
        raise ValueError(f"rerank must be one of {tuple(STORES)}, got {rerank!r}")
    return STORES[rerank](dim)


def store_fits(n: int, dim: int, rerank: str, free_bytes: int | None) -> bool:
    """Whether ``n`` vectors' re-rank copies would take at most half of ``free_bytes``."""
    if free_bytes is None or not dim:
        return True
    return 2 * n * (store_bytes(dim, rerank) + 100) <= free_bytes


def choose_kind(
    n: int,
    dim: int = 0,
    free_bytes: int | None = None,
    rerank: str = "fp16",
    stored: int | None = None,
) -> str:
    """The kind ``auto`` picks for ``n`` vectors (``ivfopq`` when no re-rank store fits the
    disk; ``stored``: the vectors it must hold, if more)."""
    if n <= EXACT_UP_TO:
        return "flat"
    if n < COMPRESSED_FROM:
        return "hnsw"
    if not store_fits(stored or n, dim, smallest_store(dim, rerank), free_bytes):
        return "ivfopq"
    return "ivfpq"


def disk_free(folder: Path) -> int | None:
    """Free bytes on the disk of ``folder`` (or of its nearest existing parent)."""
    for path in (folder, *folder.parents):
        if path.exists():
            return shutil.disk_usage(path).free
    return None


def smallest_store(dim: int, rerank: str) -> str:
    """The smallest store ``auto`` may give an ``ivfpq`` asked for ``rerank``."""
    return min((rerank, "sq8"), key=lambda r: store_bytes(dim, r))


def choose_rerank(n: int, dim: int, free_bytes: int | None, wanted: str) -> str:
    """``ivfpq``'s re-rank store: ``wanted`` when it fits the disk, else SQ8."""
    return wanted if store_fits(n, dim, wanted, free_bytes) else smallest_store(dim, wanted)


def pq_bytes(dim: int, kind: str, m: int) -> int:
    """PQ bytes a vector: ``ivfopq`` rotates into a dimension ``m`` divides; ``ivfpq`` takes
    the divisor of ``dim`` nearest ``m``, above first: 64 for 640-d, 69 for 690-d."""
    if kind == "ivfopq" or dim % m == 0:
        return m
    above = [d for d in range(m, 2 * m + 1) if dim % d == 0]
    below = [d for d in range(m, 0, -1) if dim % d == 0]
    return above[0] if above else below[0]


@dataclass
class IndexSettings:
    """Shape and search settings of the approximate kinds (``nlist`` None: about √n)."""

    nlist: int | None = None
    m: int = 64
    nprobe: int = 16
    k_factor: int = 32
    ef_search: int = 64
    #: the re-rank store of ``ivfpq``: ``fp16``, ``sq8`` or ``sq4``
    rerank: str = "fp16"
    #: vectors a build adds in memory before writing them to disk as a shard
    shard_size: int = 2_000_000

    def widened(self, lists: float = 1.0, graph: float = 1.0) -> IndexSettings:
        """Searching wider: ``lists`` times the IVF lists, ``graph`` times HNSW's list."""
        return replace(
            self,
            nprobe=math.ceil(self.nprobe * max(lists, 1.0)),
            ef_search=math.ceil(self.ef_search * max(graph, 1.0)),
        )

    def lists_for(self, n: int) -> int:
        if self.nlist is not None:
            return self.nlist
        return int(min(8192, max(64, 2 ** round(math.log2(max(n, 1)) / 2))))

    def min_train(self, n: int) -> int:
        """The fewest vectors it can be trained on (2 a list; 256 for the PQ codebooks)."""
        return max(256, 2 * self.lists_for(n))

    def train_size(self, n: int) -> int:
        """Vectors to train on: enough for the centroids, capped (training is costly)."""
        return int(min(n, max(20_000, 30 * self.lists_for(n)), 150_000))


def new_index(dim: int, kind: str, n: int = 0, ivfpq: IndexSettings | None = None) -> faiss.Index:
    """An empty index of ``kind`` (``flat``, ``hnsw``: in an ``IndexIDMap``; a compressed
    kind: its untrained IVF for about ``n`` vectors)."""
    if kind not in INDEX_KINDS:
        raise ValueError(f"kind must be one of {INDEX_KINDS}, got {kind!r}")
    if kind == "flat":
        return faiss.IndexIDMap(faiss.IndexFlatIP(dim))
    if kind == "hnsw":
        return faiss.IndexIDMap(faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT))
    params = ivfpq or IndexSettings()
    m = pq_bytes(dim, kind, params.m)
    nlist = params.lists_for(n)
    quantizer = "_HNSW32" if nlist >= 2048 else ""  # assigning millions to flat centroids
    # is the build's slowest step; a graph makes it cheap
    rotation = f"OPQ{m}_{-(-dim // m) * m}," if kind == "ivfopq" else ""
    index = FAISS.index_factory(
        dim, f"{rotation}IVF{nlist}{quantizer},PQ{m}", faiss.METRIC_INNER_PRODUCT
    )
    ivf = FAISS.downcast_index(FAISS.extract_index_ivf(index))
    # PQ of the vector itself, not of its residual (cheaper to train; the exact re-rank
    # makes up the difference: docs/BENCHMARKS.md, "Scale"; ivfopq's codes by position
    # are then the lists' own, so a given id scores as its search does)
    ivf.by_residual = False
    ivf.do_polysemous_training = False  # the factory's default; it costs minutes
    ivf.pq.cp.niter = 10
    if kind == "ivfopq":
        opq = FAISS.downcast_VectorTransform(index.chain.at(0))
        opq.niter = 20  # FAISS's 50 rounds of PQ training take long at 690-d
    return index


def search_params(index: FAISS.Index, settings: IndexSettings, selector: Any) -> Any:
    """FAISS search parameters for ``index`` (an ``IndexIDMap``) with ``selector``."""
    inner = FAISS.downcast_index(index.index)
    if isinstance(inner, FAISS.IndexRefine):
        # ``IndexIDMap`` translates only the outer selector from positions to ids; the
        # base index's parameters need a translated one of their own.
        base_sel = None if selector is None else FAISS.IDSelectorTranslated(index.id_map, selector)
        base = FAISS.SearchParametersIVF(nprobe=settings.nprobe, sel=base_sel)
        return FAISS.IndexRefineSearchParameters(
            k_factor=float(settings.k_factor), base_index_params=base, sel=selector
        )
    if isinstance(inner, FAISS.IndexHNSW):
        return FAISS.SearchParametersHNSW(efSearch=settings.ef_search, sel=selector)
    return FAISS.SearchParameters(sel=selector) if selector is not None else None


def index_name(index: FAISS.Index) -> str:
    """What ``index`` is, for logs and benchmarks (e.g. ``IVF1024,PQ64,Refine(SQfp16)``)."""
    inner = FAISS.downcast_index(index.index) if isinstance(index, FAISS.IndexIDMap) else index
    if isinstance(inner, FAISS.IndexRefine):
        ivf = FAISS.extract_index_ivf(inner)
        pq = FAISS.downcast_index(inner.base_index)
        return f"IVF{ivf.nlist},PQ{pq.pq.M},Refine(SQfp16)"
    return type(inner).__name__


def read(path: Path, mmap: bool = False) -> faiss.Index:
    """Read an index file; ``mmap``: its lists and codes paged in as searches touch them."""
    if not mmap:
        return faiss.read_index(str(path))
    # by file name FAISS maps the whole file (a FileIOReader would read the re-rank codes
    # into memory); its pages are read at random: no read-ahead (mapped_files)
    index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
    advise_random(path)
    return index
