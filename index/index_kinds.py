"""The kinds of FAISS index a gallery can search with, and how each is made.

* ``flat``: exact inner product over float32 vectors (``IndexFlatIP``) — every vector in
  RAM, search time linear in the gallery.
* ``hnsw``: a graph over the float32 vectors (``IndexHNSWFlat``, M=32) — vectors and
  graph in RAM, search time nearly constant.
* ``ivfpq``: for galleries larger than RAM, the layout clip-retrieval serves LAION-5B
  with: an inverted file (IVF) of product-quantised codes (PQ, ``m`` bytes a vector)
  whose lists are memory-mapped from the index file (FAISS reads them as
  ``OnDiskInvertedLists``), and an exact re-rank of the best ``k × k_factor`` candidates
  from float16 copies of the vectors (``IndexRefine`` over ``SQfp16``), also mapped. A process holds
  only the coarse centroids and the pages it touches. It must be trained (``train``) on a
  sample of the vectors and is immutable once written: a gallery adds to an exact delta
  beside it and rebuilds it when the delta grows (``groundsearch.index.vectors``).

``choose_kind`` is the gallery's rule when it is told ``auto`` (docs/BENCHMARKS.md, "Scale",
has the measurements behind the thresholds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from groundsearch.index.mapped_files import advise_random

#: FAISS, untyped: its stubs lack the search-parameter classes' keywords and attributes.
FAISS: Any = faiss
KINDS = ("flat", "hnsw", "ivfpq")
#: The gallery's kind when it picks by size.
AUTO = "auto"
HNSW_M = 32
#: ``auto`` uses an exact index up to this many vectors…
EXACT_UP_TO = 200_000
#: … and the compressed one from this many (between them: hnsw).
COMPRESSED_FROM = 2_000_000


def choose_kind(n: int) -> str:
    """The kind ``auto`` picks for ``n`` vectors."""
    if n <= EXACT_UP_TO:
        return "flat"
    return "hnsw" if n < COMPRESSED_FROM else "ivfpq"


@dataclass
class IndexSettings:
    """Shape and search settings of the approximate kinds.

    ``ivfpq``: ``nlist`` inverted lists (None: about √n, a power of two), ``m`` PQ bytes
    a vector (must divide the dimension), ``nprobe`` lists searched, ``k_factor``
    candidates re-ranked exactly per result asked for. ``hnsw``: ``ef_search``, the
    candidate list a search keeps (FAISS's default, 16, loses recall at 640-d).
    """

    nlist: int | None = None
    m: int = 64
    nprobe: int = 16
    k_factor: int = 32
    ef_search: int = 64

    def widened(self, lists: float = 1.0, graph: float = 1.0) -> IndexSettings:
        """These settings searching wider: ``lists`` times the IVF lists probed, ``graph``
        times HNSW's candidate list (a search whose hits must pass a filter)."""
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
    """An empty index of ``kind`` (``ivfpq``: shaped for about ``n`` vectors, untrained)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "flat":
        return faiss.IndexIDMap(faiss.IndexFlatIP(dim))
    if kind == "hnsw":
        return faiss.IndexIDMap(faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT))
    params = ivfpq or IndexSettings()
    if dim % params.m:
        raise ValueError(f"ivfpq: m={params.m} must divide the dimension {dim}")
    nlist = params.lists_for(n)
    quantizer = "_HNSW32" if nlist >= 2048 else ""  # assigning millions to flat centroids
    index = faiss.index_factory(  # is the build's slowest step; a graph makes it cheap
        dim, f"IVF{nlist}{quantizer},PQ{params.m},Refine(SQfp16)", faiss.METRIC_INNER_PRODUCT
    )
    # PQ of the vector itself, not of its residual (cheaper to train; the exact re-rank
    # makes up the difference: docs/BENCHMARKS.md, "Scale")
    ivf = FAISS.downcast_index(FAISS.extract_index_ivf(index))
    ivf.by_residual = False
    ivf.do_polysemous_training = False  # the factory's default; it costs minutes
    ivf.pq.cp.niter = 10
    return faiss.IndexIDMap(index)


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


def train(index: faiss.Index, sample: np.ndarray) -> None:
    """Train an ``ivfpq`` index on a sample of the vectors it will hold."""
    if sample.shape[0] < max(256, 2 * faiss.extract_index_ivf(index).nlist):
        raise ValueError(f"too few vectors ({sample.shape[0]}) to train {index_name(index)}")
    index.train(sample)


def index_name(index: FAISS.Index) -> str:
    """What ``index`` is, for logs and benchmarks (e.g. ``IVF1024,PQ64,Refine(SQfp16)``)."""
    inner = FAISS.downcast_index(index.index) if isinstance(index, FAISS.IndexIDMap) else index
    if isinstance(inner, FAISS.IndexRefine):
        ivf = FAISS.extract_index_ivf(inner)
        pq = FAISS.downcast_index(inner.base_index)
        return f"IVF{ivf.nlist},PQ{pq.pq.M},Refine(SQfp16)"
    return type(inner).__name__


def is_compressed(index: FAISS.Index) -> bool:
    inner = FAISS.downcast_index(index.index) if isinstance(index, FAISS.IndexIDMap) else index
    return isinstance(inner, FAISS.IndexRefine)


def read(path: Path, mmap: bool = False) -> faiss.Index:
    """Read an index written by ``faiss.write_index``; with ``mmap`` its inverted lists
    and stored codes (the float16 re-rank copy too) stay in the file, paged in as
    searches touch them (read-only)."""
    if not mmap:
        return faiss.read_index(str(path))
    # By file name FAISS maps the whole file (MappedFileIOReader): every code array is a
    # view of it. (IO_FLAG_MMAP with a FileIOReader maps only the inverted lists and
    # reads the re-rank codes, 1,280 B a vector, into memory.) Its pages are read at
    # random: no read-ahead (mapped_files).
    index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
    advise_random(path)
    return index
