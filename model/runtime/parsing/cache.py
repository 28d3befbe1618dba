"""A disk cache of parses keyed by parser version and text, so a corpus is parsed once."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from groundsearch.model.runtime.parsing.tree import DependencyTree


def cache_key(parser_version: str, text: str) -> str:
    """SHA-256 of the parser version and the exact text."""
    return hashlib.sha256(f"{parser_version}\0{text}".encode()).hexdigest()


class ParseCache:
    """SQLite map (crash-safe, shared by processes) from (parser version, text) to a tree."""

    def __init__(self, path: Path, parser_version: str) -> None:
        self.path, self.parser_version = Path(path), parser_version
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS parses (key TEXT PRIMARY KEY, tree TEXT NOT NULL)"
        )
        self._db.commit()

    def get_many(self, texts: Sequence[str]) -> list[DependencyTree | None]:
        """The cached tree of each text, or None where it was never parsed."""
        keys = [cache_key(self.parser_version, t) for t in texts]
        found: dict[str, str] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT key, tree FROM parses WHERE key IN ({marks})"
                found.update(self._db.execute(query, chunk).fetchall())
        return [DependencyTree.from_json(found[k]) if k in found else None for k in keys]

    def put_many(self, items: Iterable[tuple[str, DependencyTree]]) -> None:
        """Store trees for texts (one transaction)."""
        rows = [(cache_key(self.parser_version, t), tree.to_json()) for t, tree in items]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO parses VALUES (?, ?)", rows)
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM parses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
