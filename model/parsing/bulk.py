"""Parse a large corpus with several single-threaded worker processes.

On a small CPU, one process per core with one torch thread each beats one process
with several threads: stanza's small matrix products do not parallelise well.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from model.parsing.tree import DependencyTree

_worker_parser = None


def _init_worker(parser_dir: str, cache_dir: str) -> None:
    import torch

    from model.parsing.parser import Parser

    global _worker_parser
    torch.set_num_threads(1)
    _worker_parser = Parser(Path(parser_dir), Path(cache_dir), use_cache=False)


def _parse_chunk(texts: Sequence[str]) -> list[dict]:
    assert _worker_parser is not None
    return [t.to_dict() for t in _worker_parser.parse(list(texts))]


def parse_in_processes(
    texts: Sequence[str], parser_dir: Path, cache_dir: Path, workers: int, chunk: int = 500
) -> list[DependencyTree]:
    """Trees of ``texts`` (already cleaned), in order, parsed by ``workers`` processes."""
    chunks = [list(texts[i : i + chunk]) for i in range(0, len(texts), chunk)]
    with ProcessPoolExecutor(
        workers,
        mp_context=mp.get_context("spawn"),
        initializer=_init_worker,
        initargs=(str(parser_dir), str(cache_dir)),
    ) as pool:
        results = pool.map(_parse_chunk, chunks)
        return [DependencyTree.from_dict(d) for part in results for d in part]
