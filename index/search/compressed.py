"""Compressed indexes built in bounded memory, shard by shard, and served from disk.

A compressed main (``ivfpq``, ``ivfopq``) is four files named by one path ``P``: ``P``
(the IVF-PQ index, mapped by name), ``P.codes`` (one re-rank or PQ code a vector, by
position), ``P.ids`` (the sorted int64 ids) and ``P.codec`` (the codec of ``P.codes``).
The build adds chunks to a trained IVF until a shard (``shard_size``) is full, writes its
lists out and empties the IVF (``manifest.json`` records each shard: a killed build
resumes), then merges the shards list by list: peak memory is one shard's codes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import struct
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from groundsearch.common.files import sync
from groundsearch.index.search.index_kinds import (
    FAISS,
    IndexSettings,
    new_index,
    pq_bytes,
    store_bytes,
)
from groundsearch.index.search.mapped_files import (
    READERS,
    advise_random,
    gather,
    larger_than_memory,
)

log = logging.getLogger("groundsearch.index")
SUFFIXES = (".codes", ".ids", ".codec")
MANIFEST = "manifest.json"
#: bytes FAISS writes for an empty ``ArrayInvertedLists`` (``ilar``, nlist, code size,
#: ``sprs``, an empty vector): the tail of a trained, empty IVF's file
EMPTY_LISTS = 32
#: free space kept beyond the estimate (file headers, the page cache's slack)
DISK_MARGIN = 64 * 2**20


class DiskSpaceError(OSError):
    """Not enough free disk for a build; the message names the bytes needed and free."""


def _codec(kind: str, dim: int, trained: Any, settings: IndexSettings) -> Any:
    """The store's codec: a float16/SQ re-rank store (ivfpq), or the IVF's own PQ (ivfopq)."""
    if kind == "ivfopq":
        ivf = FAISS.downcast_index(FAISS.extract_index_ivf(trained))
        codec = FAISS.IndexPQ(ivf.d, ivf.pq.M, ivf.pq.nbits, faiss.METRIC_INNER_PRODUCT)
        codec.pq = ivf.pq
        codec.is_trained = True
        return codec
    qtype = {
        "fp16": faiss.ScalarQuantizer.QT_fp16,
        "sq8": faiss.ScalarQuantizer.QT_8bit,
        "sq4": faiss.ScalarQuantizer.QT_4bit,
    }
    if settings.rerank not in qtype:
        raise ValueError(f"rerank must be one of {tuple(qtype)}, got {settings.rerank!r}")
    return faiss.IndexScalarQuantizer(dim, qtype[settings.rerank], faiss.METRIC_INNER_PRODUCT)


def _transform(index: Any) -> Any:
    """The rotation in front of an ``ivfopq`` IVF (None for ``ivfpq``)."""
    if isinstance(index, FAISS.IndexPreTransform):
        return FAISS.downcast_VectorTransform(index.chain.at(0))
    return None


class CompressedIndex:
    """A built compressed main: an IVF-PQ and a store of one code a vector, by position."""

    def __init__(
        self, index: Any, codec: Any, codes: np.ndarray, ids: np.ndarray, readers: int = 0
    ) -> None:
        self.index = index  # the IVF, or an OPQ rotation in front of it
        self.ivf = FAISS.downcast_index(FAISS.extract_index_ivf(index))
        self.transform = _transform(index)
        self.codec = codec
        #: whether the store re-ranks candidates (ivfpq) or only scores given ids (ivfopq)
        self.rerank = isinstance(codec, FAISS.IndexScalarQuantizer)
        self.fp16 = codec_is_fp16(codec)
        self.codes, self.ids = codes, ids
        self.d = int(index.d)
        #: threads reading the store's rows at once (``gather``; 0: one)
        self.readers = readers

    @property
    def ntotal(self) -> int:
        return int(self.ids.shape[0])

    @property
    def name(self) -> str:
        """e.g. ``IVF1024,PQ64,Refine(SQfp16)`` or ``OPQ64_704,IVF1024,PQ64``."""
        ivf = f"IVF{self.ivf.nlist},PQ{self.ivf.pq.M}"
        if self.transform is not None:
            return f"OPQ{self.ivf.pq.M}_{self.ivf.d},{ivf}"
        store = {"QT_fp16": "SQfp16", "QT_8bit": "SQ8", "QT_4bit": "SQ4"}
        qtypes = {getattr(faiss.ScalarQuantizer, q): s for q, s in store.items()}
        return f"{ivf},Refine({qtypes[self.codec.sq.qtype]})"

    @classmethod
    def open(cls, path: Path, mmap: bool = True) -> CompressedIndex:
        """The main written at ``path``; ``mmap``: paged in at random from its files."""
        path, codes_path, ids_path, codec_path = files_of(Path(path))
        codec = faiss.read_index(str(codec_path))
        width = int(codec.sa_code_size())
        ids: np.ndarray = np.empty(0, np.int64)
        codes: np.ndarray = np.empty((0, width), np.uint8)
        if mmap:
            index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
            if ids_path.stat().st_size:  # numpy cannot map an empty file
                ids = np.memmap(ids_path, np.int64, "r")
                codes = np.memmap(codes_path, np.uint8, "r", shape=(ids.shape[0], width))
            for p in (path, codes_path):
                advise_random(p)
        else:
            index = faiss.read_index(str(path))
            ids = np.fromfile(ids_path, np.int64)
            codes = np.fromfile(codes_path, np.uint8).reshape(-1, width)
        readers = READERS if mmap and larger_than_memory(codes.nbytes) else 0
        return cls(index, codec, codes, ids, readers)

    def write(self, path: Path) -> None:
        """Write this (in-memory) main as the four files of ``path``, each synced."""
        files = path, codes_path, ids_path, codec_path = files_of(Path(path))
        faiss.write_index(self.index, str(path))
        faiss.write_index(self.codec, str(codec_path))
        np.ascontiguousarray(self.codes).tofile(codes_path)
        np.ascontiguousarray(self.ids).tofile(ids_path)
        for p in files:
            sync(p)

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Where each of ``ids`` sits, -1 where it is not held."""
        n = self.ntotal
        if n == 0 or not ids.size:
            return np.full(ids.shape, -1, np.int64)
        pos = np.minimum(np.searchsorted(self.ids, ids), n - 1)
        return np.where(self.ids[pos] == ids, pos, -1).astype(np.int64)

    def decoded(self, pos: np.ndarray) -> np.ndarray:
        """The stored vectors at ``pos`` (in the IVF's space for ``ivfopq``)."""
        codes = gather(self.codes, np.asarray(pos, np.int64), self.readers)
        if self.fp16:
            return codes.view(np.float16).astype(np.float32)
        return np.asarray(self.codec.sa_decode(codes), np.float32)

    def _space(self, x: np.ndarray) -> np.ndarray:
        return x if self.transform is None else np.asarray(self.transform.apply(x), np.float32)

    def inner_products(self, query: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """``query``'s inner products with the stored vectors at ``pos``, as a search
        scores them (the re-rank's, or the PQ's for ``ivfopq``)."""
        q = query if self.rerank else self._space(query[None, :])[0]
        return np.asarray(self.decoded(pos) @ q, np.float32)

    def search(
        self, x: np.ndarray, k: int, settings: IndexSettings, sel: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the ``k`` best of each row: the IVF's ``k × k_factor`` best
        re-ranked from the store (``ivfpq``), or its ``k`` best (``ivfopq``)."""
        wanted = min(self.ntotal, k * max(1, settings.k_factor)) if self.rerank else k
        params = FAISS.SearchParametersIVF(nprobe=settings.nprobe, sel=sel)
        scores, labels = self.ivf.search(self._space(x), max(wanted, 1), params=params)
        if not self.rerank:
            return scores, labels
        out_s = np.full((x.shape[0], k), -np.inf, np.float32)
        out_i = np.full((x.shape[0], k), -1, np.int64)
        for row in range(x.shape[0]):
            cand = labels[row][labels[row] >= 0]
            if not cand.size:
                continue
            exact = self.decoded(self.positions(cand)) @ x[row]
            order = np.argsort(-exact, kind="stable")[:k]
            out_s[row, : order.size], out_i[row, : order.size] = exact[order], cand[order]
        return out_s, out_i


def files_of(path: Path) -> list[Path]:
    """The four files of a compressed main written at ``path``."""
    return [path, *(path.with_name(path.name + s) for s in SUFFIXES)]


def _fingerprint(dim: int, kind: str, n: int, settings: IndexSettings, key: str) -> dict[str, Any]:
    searching = ("nprobe", "k_factor", "ef_search")
    shape = {f: v for f, v in asdict(settings).items() if f not in searching}
    return {"dim": dim, "kind": kind, "n": n, "key": key, **shape}


def bytes_needed(dim: int, kind: str, n: int, settings: IndexSettings) -> int:
    """Disk a build of ``n`` vectors needs at its peak (shards' lists, merged file, store)."""
    list_code = pq_bytes(dim, kind, settings.m) + 8
    if kind == "ivfopq":
        store = pq_bytes(dim, kind, settings.m)  # the codes by position, no re-rank copy
    else:
        store = store_bytes(dim, settings.rerank)
    return n * (2 * list_code + store + 8)


def check_disk(folder: Path, needed: int) -> None:
    """Raise ``DiskSpaceError`` unless ``folder``'s disk has ``needed`` bytes free."""
    free = shutil.disk_usage(folder).free
    if needed + DISK_MARGIN > free:
        raise DiskSpaceError(
            f"not enough disk in {folder} to build the index: it needs {needed:,} bytes "
            f"({needed / 2**30:.1f} GiB) and {free:,} bytes ({free / 2**30:.1f} GiB) are free"
        )


class _Manifest:
    """The work folder's record of a build: its fingerprint and the finished shards."""

    def __init__(self, work: Path, fingerprint: dict[str, Any]) -> None:
        self.path = work / MANIFEST
        self.doc: dict[str, Any] = {"build": fingerprint, "shards": []}
        with contextlib.suppress(OSError, ValueError):
            old = json.loads(self.path.read_text(encoding="utf-8"))
            if old.get("build") == fingerprint and (work / "trained.faiss").exists():
                self.doc = old

    @property
    def shards(self) -> list[dict[str, int]]:
        return list(self.doc["shards"])

    def last(self, field: str) -> int:
        return int(self.doc["shards"][-1][field]) if self.doc["shards"] else 0

    def finish_shard(self, shard: dict[str, int]) -> None:
        self.doc["shards"].append(shard)
        tmp = self.path.with_name(MANIFEST + ".tmp")
        tmp.write_text(json.dumps(self.doc), encoding="utf-8")
        sync(tmp)
        os.replace(tmp, self.path)


def build_compressed(
    dim: int,
    kind: str,
    n: int,
    sample: np.ndarray,
    chunks: Iterable[tuple[list[int], np.ndarray]],
    work: Path,
    settings: IndexSettings,
    key: str = "",
    on_shard: Callable[[int], None] | None = None,
) -> Path:
    """Build a compressed main over ``chunks`` (ids increasing) in ``work``; returns
    ``work/main.faiss``. A build begun there with the same shape and ``key`` resumes after
    its last shard (``on_shard(i)`` called after each); ``DiskSpaceError`` first."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    manifest = _Manifest(work, _fingerprint(dim, kind, n, settings, key))
    done_rows = manifest.last("rows")
    check_disk(work, bytes_needed(dim, kind, max(0, n - done_rows), settings))
    trained_path = work / "trained.faiss"
    if manifest.shards:
        trained = faiss.read_index(str(trained_path))
        log.info("resuming the build in %s after %d vectors", work, done_rows)
    else:
        for old in work.iterdir():
            old.unlink()
        trained = new_index(dim, kind, n, settings)
        trained.train(np.ascontiguousarray(sample, np.float32))
        faiss.write_index(trained, str(trained_path))
        sync(trained_path)
    codec = _codec(kind, dim, trained, settings)
    if not codec.is_trained:
        codec.train(np.ascontiguousarray(sample, np.float32))
    faiss.write_index(codec, str(work / "main.faiss.codec"))
    transform = _transform(trained)
    ivf = FAISS.downcast_index(FAISS.extract_index_ivf(trained))
    nlist, code_size = int(ivf.nlist), int(ivf.code_size)

    store_path, ids_path = work / "store.codes", work / "store.ids"
    with open(store_path, "ab") as fh:  # a killed shard's codes are cut off
        fh.truncate(manifest.last("store_bytes"))
    with open(ids_path, "ab") as fh:
        fh.truncate(8 * done_rows)
    last_id = manifest.last("last_id")
    if last_id and hasattr(chunks, "after"):
        chunks = chunks.after(last_id)
    shard_rows, rows = 0, done_rows
    with open(store_path, "ab") as store, open(ids_path, "ab") as id_file:
        for ids, vectors in chunks:
            id_arr = np.asarray(ids, np.int64)
            x = np.ascontiguousarray(vectors, np.float32)
            keep = id_arr > last_id
            if not keep.all():
                id_arr, x = id_arr[keep], np.ascontiguousarray(x[keep])
            if not id_arr.size:
                continue
            trained.add_with_ids(x, id_arr)
            space = x if kind == "ivfpq" else np.asarray(transform.apply(x), np.float32)
            codes = space.astype(np.float16) if codec_is_fp16(codec) else codec.sa_encode(space)
            store.write(np.ascontiguousarray(codes).tobytes())
            id_file.write(id_arr.tobytes())
            last_id = int(id_arr[-1])
            shard_rows, rows = shard_rows + id_arr.size, rows + id_arr.size
            if shard_rows >= settings.shard_size:
                _finish_shard(trained, ivf, work, manifest, store, id_file, rows, last_id)
                shard_rows = 0
                if on_shard is not None:
                    on_shard(len(manifest.shards) - 1)
        if shard_rows:
            _finish_shard(trained, ivf, work, manifest, store, id_file, rows, last_id)
            if on_shard is not None:
                on_shard(len(manifest.shards) - 1)
    del trained
    empty = faiss.read_index(str(trained_path))
    _merge(empty, work, manifest.shards, nlist, code_size, work / "main.faiss")
    os.replace(store_path, work / "main.faiss.codes")
    os.replace(ids_path, work / "main.faiss.ids")
    for p in files_of(work / "main.faiss"):
        sync(p)
    for p in work.glob("shard-*"):
        p.unlink()
    log.info("built %s of %d vectors in %d shards", kind, rows, len(manifest.shards))
    return work / "main.faiss"


def codec_is_fp16(codec: Any) -> bool:
    return isinstance(codec, FAISS.IndexScalarQuantizer) and (
        codec.sq.qtype == faiss.ScalarQuantizer.QT_fp16
    )


def _finish_shard(
    index: Any,
    ivf: Any,
    work: Path,
    manifest: _Manifest,
    store: Any,
    id_file: Any,
    rows: int,
    last_id: int,
) -> None:
    """Write the shard's inverted lists, sync the appended files, record it, empty the IVF."""
    number = len(manifest.shards)
    lists = ivf.invlists
    sizes = np.array([lists.list_size(i) for i in range(ivf.nlist)], np.int64)
    stem = work / f"shard-{number:05d}"
    with open(stem.with_suffix(".lists.tmp"), "wb") as fh:
        for i in np.flatnonzero(sizes):
            codes = faiss.rev_swig_ptr(lists.get_codes(int(i)), int(sizes[i]) * ivf.code_size)
            fh.write(codes.tobytes())
        for i in np.flatnonzero(sizes):
            fh.write(faiss.rev_swig_ptr(lists.get_ids(int(i)), int(sizes[i])).tobytes())
    np.save(stem.with_suffix(".sizes.npy"), sizes)
    sync(stem.with_suffix(".sizes.npy"))
    sync(stem.with_suffix(".lists.tmp"))
    os.replace(stem.with_suffix(".lists.tmp"), stem.with_suffix(".lists"))
    for fh in (store, id_file):
        fh.flush()
        os.fsync(fh.fileno())
    manifest.finish_shard(
        {"rows": rows, "last_id": last_id, "store_bytes": store.tell(), "vectors": int(sizes.sum())}
    )
    index.reset()


def _merge(
    empty: Any, work: Path, shards: list[dict[str, int]], nlist: int, code_size: int, out: Path
) -> None:
    """Write ``out``: the empty index's file with every shard's lists merged in, streamed."""
    parts = []
    for number in range(len(shards)):
        stem = work / f"shard-{number:05d}"
        sizes = np.load(stem.with_suffix(".sizes.npy"))
        fd = os.open(stem.with_suffix(".lists"), os.O_RDONLY)
        nonzero = sizes[sizes > 0]
        starts = np.zeros(sizes.shape, np.int64)
        starts[sizes > 0] = np.concatenate([[0], np.cumsum(nonzero)[:-1]])
        parts.append((fd, sizes, starts, int(sizes.sum())))
    total = sum((p[1] for p in parts), np.zeros(nlist, np.int64))
    empty.ntotal = int(total.sum())  # the header's count (the lists follow it)
    FAISS.extract_index_ivf(empty).ntotal = int(total.sum())
    head = faiss.serialize_index(empty).tobytes()
    tail = head[-EMPTY_LISTS:]
    if tail[:4] != b"ilar" or tail[20:24] != b"sprs":
        raise RuntimeError("unexpected FAISS file layout: cannot merge the shards")
    tmp = out.with_name(out.name + ".tmp")
    try:
        with open(tmp, "wb", buffering=8 * 2**20) as fh:
            fh.write(head[:-EMPTY_LISTS])
            fh.write(b"ilar" + struct.pack("<QQ", nlist, code_size))
            nonzero = np.flatnonzero(total)
            if nonzero.size > nlist // 2:
                fh.write(b"full" + struct.pack("<Q", nlist) + total.astype("<u8").tobytes())
            else:
                pairs = np.stack([nonzero, total[nonzero]], axis=1).astype("<u8")
                fh.write(b"sprs" + struct.pack("<Q", pairs.size) + pairs.tobytes())
            for i in nonzero:
                for fd, sizes, starts, _ in parts:
                    if sizes[i]:
                        at = int(starts[i]) * code_size
                        fh.write(os.pread(fd, int(sizes[i]) * code_size, at))
                for fd, sizes, starts, count in parts:
                    if sizes[i]:
                        at = count * code_size + int(starts[i]) * 8
                        fh.write(os.pread(fd, int(sizes[i]) * 8, at))
        sync(tmp)
        os.replace(tmp, out)
    finally:
        for fd, *_ in parts:
            os.close(fd)
        tmp.unlink(missing_ok=True)


def move_to(work: Path, path: Path) -> None:
    """Move the main built in ``work`` to ``path`` (same disk) and remove ``work``."""
    for src, dst in zip(files_of(work / "main.faiss"), files_of(path), strict=True):
        os.replace(src, dst)
    shutil.rmtree(work, ignore_errors=True)
