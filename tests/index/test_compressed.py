"""Compressed indexes built shard by shard in bounded memory, resumed, served from disk."""

from __future__ import annotations

import json
import os
import signal
import time

import faiss
import numpy as np
import pytest

from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.indexing_runs import IndexedFiles
from groundsearch.index.search import compressed, index_kinds, mapped_files, search_indexes
from groundsearch.index.search import vectors as vectors_module
from groundsearch.index.search.compressed import CompressedIndex, DiskSpaceError, build_compressed
from groundsearch.index.search.index_kinds import choose_kind, choose_rerank, new_index, pq_bytes
from groundsearch.index.search.vectors import IndexSettings, VectorIndex
from tests.index.synthetic import DIM as GALLERY_DIM
from tests.index.synthetic import ID, indexed, search_images, vecs

DIM, N = 64, 20_000


def data(seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vectors, their ids, queries): clustered unit vectors, ids unlike positions."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(200, DIM))
    x = centres[rng.integers(0, 200, N + 40)] + 0.4 * rng.normal(size=(N + 40, DIM))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    return x[:N], np.arange(5, 5 + 3 * N, 3, dtype=np.int64), x[N:]


def chunks(x: np.ndarray, ids: np.ndarray, size: int = 2500):
    return [(ids[i : i + size].tolist(), x[i : i + size]) for i in range(0, len(x), size)]


SETTINGS = IndexSettings(nlist=64, m=16, nprobe=16, k_factor=8, shard_size=7000)


@pytest.mark.parametrize("kind", ["ivfpq", "ivfopq"])
def test_a_sharded_build_writes_and_answers_what_a_one_piece_build_does(tmp_path, kind):
    x, ids, q = data()
    sample = x[::4] if kind == "ivfpq" else x[::10]  # OPQ's training is the slow part
    sharded = build_compressed(DIM, kind, N, sample, chunks(x, ids), tmp_path / "s", SETTINGS)
    one = IndexSettings(**{**vars(SETTINGS), "shard_size": 10 * N})
    whole = build_compressed(DIM, kind, N, sample, chunks(x, ids), tmp_path / "w", one)
    assert json.loads((tmp_path / "s" / "manifest.json").read_text())["shards"][-1]["rows"] == N
    assert len(json.loads((tmp_path / "s" / "manifest.json").read_text())["shards"]) == 3
    for a, b in zip(compressed.files_of(sharded), compressed.files_of(whole), strict=True):
        assert a.read_bytes() == b.read_bytes()
    # … and the lists are the file FAISS writes for the same index filled in memory
    trained = faiss.read_index(str(tmp_path / "s" / "trained.faiss"))
    trained.add_with_ids(x, ids)
    assert faiss.serialize_index(trained).tobytes() == sharded.read_bytes()
    s_index, w_index = CompressedIndex.open(sharded), CompressedIndex.open(whole, mmap=False)
    s_scores, s_ids = s_index.search(q, 10, SETTINGS, None)
    w_scores, w_ids = w_index.search(q, 10, SETTINGS, None)
    assert (s_ids == w_ids).all() and np.allclose(s_scores, w_scores)
    exact = [set(ids[np.argsort(-(x @ row))[:10]].tolist()) for row in q]
    recall = np.mean([len(set(r.tolist()) & e) / 10 for r, e in zip(s_ids, exact, strict=True)])
    assert recall >= (0.9 if kind == "ivfpq" else 0.3)  # no re-rank: PQ16 of 64-d alone
    # a given id scores as its search reported it
    pos = s_index.positions(s_ids[0])
    assert np.allclose(s_index.inner_products(q[0], pos), s_scores[0], atol=1e-4)


def test_a_store_larger_than_memory_is_read_by_several_threads_with_the_same_answers(
    tmp_path, monkeypatch
):
    x, ids, q = data(seed=5)
    built = build_compressed(DIM, "ivfpq", N, x[::4], chunks(x, ids), tmp_path / "b", SETTINGS)
    serial = CompressedIndex.open(built)
    assert serial.readers == 0  # a small store: the page cache holds it
    assert not mapped_files.larger_than_memory(2**20) and mapped_files.larger_than_memory(2**60)
    monkeypatch.setattr(compressed, "larger_than_memory", lambda nbytes: True)
    threaded = CompressedIndex.open(built)
    assert threaded.readers == mapped_files.READERS > 1
    wide = IndexSettings(**{**vars(SETTINGS), "k_factor": 64})  # 640 candidates a query
    (a_s, a_i), (b_s, b_i) = (i.search(q, 10, wide, None) for i in (serial, threaded))
    assert (a_i == b_i).all() and np.array_equal(a_s, b_s)
    pos = np.random.default_rng(0).integers(0, N, 3000)  # unsorted, with repeats
    assert np.array_equal(threaded.decoded(pos), serial.decoded(pos))
    assert np.array_equal(mapped_files.gather(serial.codes, pos, 7), serial.codes[pos])
    # a process forked after the parent's readers started reads with threads of its own
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's answer is its exit status
        same = np.array_equal(threaded.decoded(pos), serial.decoded(pos))
        os._exit(0 if same else 1)
    for _ in range(600):  # a child waiting on threads it does not have would hang: 60 s
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        pytest.fail("the forked child's read hung")
    assert os.waitstatus_to_exitcode(status) == 0


class Stop(Exception):
    pass


def test_a_build_killed_between_shards_resumes_after_the_last_finished_one(tmp_path):
    x, ids, q = data(4)
    sample = x[::4]
    stem = tmp_path / "g" / "images"
    stem.parent.mkdir()
    work = stem.with_name(".images.build")

    def stop_after_shard_1(shard: int) -> None:
        if shard == 1:
            raise Stop

    with pytest.raises(Stop):
        build_compressed(
            DIM, "ivfpq", N, sample, chunks(x, ids), work, SETTINGS, "k", stop_after_shard_1
        )
    manifest = json.loads((work / "manifest.json").read_text())
    assert [s["rows"] for s in manifest["shards"]] == [7500, 15000]
    # what the killed build had appended past its last shard is cut off on resume
    with open(work / "store.codes", "ab") as fh:
        fh.write(b"half a chunk")
    seen: list[int] = []

    def counted():
        for chunk_ids, chunk in chunks(x, ids):
            seen.append(len(chunk_ids))
            yield chunk_ids, chunk

    resumed = VectorIndex.build(DIM, "ivfpq", N, sample, counted(), stem, SETTINGS, key="k")
    assert not work.exists()  # merged, moved beside the stem, work folder gone
    fresh = VectorIndex.build(
        DIM, "ivfpq", N, sample, chunks(x, ids), tmp_path / "f" / "images", SETTINGS, key="k"
    )
    assert resumed.search(q, 10) == fresh.search(q, 10)
    assert len(resumed) == N and resumed.last_id == int(ids[-1])
    main = stem.with_name(resumed._main_file or "")
    other = tmp_path / "f" / (fresh._main_file or "")
    for a, b in zip(compressed.files_of(main), compressed.files_of(other), strict=True):
        assert a.read_bytes() == b.read_bytes()
    # another key (the gallery's vectors changed) starts over instead of resuming
    with pytest.raises(Stop):
        build_compressed(
            DIM, "ivfpq", N, sample, chunks(x, ids), work, SETTINGS, "k", stop_after_shard_1
        )
    build_compressed(DIM, "ivfpq", N, sample, chunks(x, ids), work, SETTINGS, "other")
    assert len(json.loads((work / "manifest.json").read_text())["shards"]) == 3


def test_a_build_the_disk_cannot_hold_is_refused_before_anything_is_written(tmp_path):
    x, ids, _ = data(5)
    n = 10**13  # claims more vectors than any disk here holds
    with pytest.raises(DiskSpaceError, match=r"needs [\d,]+ bytes .* and [\d,]+ bytes .* free"):
        VectorIndex.build(DIM, "ivfpq", n, x[::4], chunks(x, ids), tmp_path / "images", SETTINGS)
    assert not list(tmp_path.glob("images-*"))
    assert compressed.bytes_needed(DIM, "ivfpq", 1000, SETTINGS) == 1000 * (2 * 24 + 128 + 8)
    assert compressed.bytes_needed(DIM, "ivfopq", 1000, SETTINGS) == 1000 * (2 * 24 + 16 + 8)


def test_the_kinds_shapes_and_the_automatic_choice_for_a_short_disk():
    assert pq_bytes(640, "ivfpq", 64) == 64 and pq_bytes(690, "ivfpq", 64) == 69
    assert pq_bytes(690, "ivfopq", 64) == 64  # rotated into 704-d
    opq = new_index(690, "ivfopq", 10_000, IndexSettings(m=64))
    assert faiss.downcast_VectorTransform(opq.chain.at(0)).d_out == 704
    assert choose_kind(5_000_000, 640, free_bytes=100 * 2**30) == "ivfpq"
    assert choose_rerank(5_000_000, 640, 100 * 2**30, "fp16") == "fp16"
    # float16 copies want 2 × 5M × 1,380 B (12.9 GiB), 8-bit ones 2 × 5M × 740 B (6.9 GiB)
    assert choose_kind(5_000_000, 640, free_bytes=10 * 2**30) == "ivfpq"
    assert choose_rerank(5_000_000, 640, 10 * 2**30, "fp16") == "sq8"
    assert choose_rerank(5_000_000, 640, 10 * 2**30, "sq4") == "sq4"  # asked smaller: kept
    assert choose_kind(5_000_000, 640, free_bytes=6 * 2**30) == "ivfopq"
    assert choose_kind(5_000_000, 640, free_bytes=6 * 2**30, rerank="sq4") == "ivfpq"
    assert choose_kind(5_000_000) == "ivfpq"
    assert choose_rerank(5_000_000, 640, None, "fp16") == "fp16"  # the disk unknown


def test_an_auto_gallery_on_a_short_disk_keeps_ivfpq_with_8_bit_copies(tmp_path, monkeypatch):
    monkeypatch.setattr(vectors_module, "DELTA_MIN", 100)
    monkeypatch.setattr(index_kinds, "EXACT_UP_TO", 50)
    monkeypatch.setattr(index_kinds, "COMPRESSED_FROM", 100)
    n = 300
    fp16, sq8 = (2 * n * (b + 100) for b in (2 * GALLERY_DIM, GALLERY_DIM))
    # room for 8-bit copies of the 300 vectors, not for float16 ones
    monkeypatch.setattr(search_indexes, "_free_bytes", lambda folder: (fp16 + sq8) // 2)
    # flat is the wrong kind for 300 here: maintain rebuilds it compressed
    asked = built_and_reopened(tmp_path, index_kinds.AUTO, "IVF64,PQ4,Refine(SQ8) + 0 exact")
    assert asked.rerank == "fp16"  # what was asked stays asked
    with pytest.raises(ValueError, match="rerank must be one of"):
        choose_rerank(n, GALLERY_DIM, 0, "fp8")


def built_and_reopened(tmp_path, kind: str, name: str) -> IndexSettings:
    """A gallery of ``kind`` with 300 photos, maintained (its index built as ``name``),
    closed and reopened: each answers a photo's own vector with that photo. Returns the
    writer's settings as they were when it closed."""
    writer = Gallery.create(tmp_path / "g", GALLERY_DIM, ID, kind=kind)
    writer.indexes.settings = IndexSettings(m=4, nprobe=64)
    v = vecs(300)
    IndexedFiles(writer).add_files([indexed(i, v[i], ("x",)) for i in range(300)], run=1)
    writer.indexes.maintain()  # trained, built in shards, written, snapshotted

    def answers(gallery: Gallery, described: str) -> None:
        assert gallery.indexes.describe()["images"].startswith(described)
        assert search_images(gallery, v[10], 1)[0].id == 11

    answers(writer, name)
    settings = writer.indexes.settings
    writer.close()
    again = Gallery.open(tmp_path / "g", ID)
    answers(again, name.split(" + ")[0])
    again.close()
    return settings


def test_an_ivfopq_index_leaves_out_removed_ids_and_scores_given_ones(tmp_path):
    x, ids, q = data(6)
    index = VectorIndex.build(
        DIM, "ivfopq", N, x[::4], chunks(x, ids), tmp_path / "images", SETTINGS
    )
    assert index.describe() == "OPQ16_64,IVF64,PQ16 + 0 exact"
    best = index.search(q[0], 5)[0]
    index.remove([best[0][0]])
    after = index.search(q[0], 5)[0]
    assert best[0][0] not in {i for i, _ in after} and after[0] == best[1]
    found, scores = index.score(q[0], np.array(sorted(i for i, _ in after)))
    assert dict(zip(found.tolist(), scores.tolist(), strict=True)) == pytest.approx(dict(after))
    index.save(tmp_path / "images", {"identity": "t"})
    loaded = VectorIndex.load(tmp_path / "images", {"identity": "t"})
    assert loaded is not None and loaded.search(q, 10) == index.search(q, 10)


def test_a_gallery_of_the_short_disk_kind_rebuilds_from_its_records(tmp_path, monkeypatch):
    monkeypatch.setattr(vectors_module, "DELTA_MIN", 100)
    built_and_reopened(tmp_path, "ivfopq", "OPQ4_8,IVF64,PQ4 + 0 exact")


def test_a_snapshot_written_before_the_sharded_build_still_loads_and_answers(tmp_path):
    # a compressed main of the earlier layout: IndexIDMap(IndexRefine(IVF-PQ, SQfp16)), one file
    x, ids, q = data(8)
    inner = faiss.index_factory(DIM, "IVF64,PQ16,Refine(SQfp16)", faiss.METRIC_INNER_PRODUCT)
    old = faiss.IndexIDMap(inner)
    old.train(x[::4])
    old.add_with_ids(x, ids)
    faiss.write_index(old, str(tmp_path / "images-0123456789ab.main.faiss"))
    doc = {"identity": "t", "dim": DIM, "kind": "ivfpq", "sealed": True, "last_id": int(ids[-1])}
    doc |= {"last_removal": 0, "tombstones": [int(ids[3])], "settings": {"m": 16}}
    (tmp_path / "images.json").write_text(json.dumps({**doc, "file": old_name(tmp_path)}))
    loaded = VectorIndex.load(tmp_path / "images", {"identity": "t"})
    assert loaded is not None and loaded.describe() == "IVF64,PQ16,Refine(SQfp16) + 0 exact"
    assert loaded.search(x[3], 1)[0][0][0] != ids[3]  # its tombstone still applies
    assert loaded.search(x[4], 1)[0][0][0] == ids[4]
    found, _ = loaded.score(q[0], ids[:10])
    assert found.tolist() == [i for i in ids[:10].tolist() if i != ids[3]]


def old_name(folder) -> str:
    return next(folder.glob("images-*.main.faiss")).name
