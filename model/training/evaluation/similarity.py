"""Sentence-level tests: the paper's §6.1 sentence similarity, and correlation with
human judgments (Flickr8k expert scores, STS Benchmark, SICK-R)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from groundsearch.model.data.flickr import DatasetError


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def same_image_mean_rank(captions: np.ndarray, caption_image: np.ndarray) -> float:
    """Paper §6.1: the mean rank of each caption's nearest same-image caption."""
    y = _unit(captions)
    links = np.asarray(caption_image)
    ranks = []
    for start in range(0, len(y), 1000):
        sims = y[start : start + 1000] @ y.T
        rows = np.arange(start, min(start + 1000, len(y)))
        sims[np.arange(len(rows)), rows] = -np.inf  # not itself
        same = links[rows][:, None] == links[None, :]
        same[np.arange(len(rows)), rows] = False
        if not same.any(axis=1).all():
            raise ValueError("every caption needs another caption of the same image")
        best = np.where(same, sims, -np.inf).max(axis=1)
        ranks.append(1 + (sims > best[:, None]).sum(axis=1))
    return float(np.concatenate(ranks).mean())


def rankdata(x: np.ndarray) -> np.ndarray:
    """Ranks (1-based) with ties given their average rank."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("correlation needs two equal-length sequences of 2+ values")
    a, b = a - a.mean(), b - b.mean()
    return float((a @ b) / np.sqrt((a @ a) * (b @ b)))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    return pearson(rankdata(a), rankdata(b))


def cosine_pairs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two embedding matrices."""
    return (_unit(x) * _unit(y)).sum(axis=1)


def _score(path: Path, n: int, value: str, low: float, high: float) -> float:
    try:
        score = float(value)
    except ValueError:
        score = float("nan")
    if not low <= score <= high:
        raise DatasetError(f"{path}:{n}: expected a score in {low:g}–{high:g}, got {value!r}")
    return score


def _lines(path: Path) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path} is not UTF-8 text ({exc.reason})") from None


def _rows(path: Path) -> list[tuple[int, list[str]]]:
    """The non-blank lines of ``path``, numbered from 1, split at tabs."""
    return [(n, line.split("\t")) for n, line in enumerate(_lines(path), 1) if line.strip()]


def read_sts(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """STS Benchmark pairs: ``genre file year id score s1 s2 [extra…]`` per line."""
    a, b, scores = [], [], []
    for n, cols in _rows(path):
        if len(cols) < 7:
            raise DatasetError(
                f"{path}:{n}: expected 7 tab-separated columns "
                f"(genre file year id score s1 s2), got {len(cols)}"
            )
        scores.append(_score(path, n, cols[4], 0, 5))
        a.append(cols[5])
        b.append(cols[6])
    return a, b, np.array(scores)


def read_sick(path: Path, subset: str = "TEST") -> tuple[list[str], list[str], np.ndarray]:
    """SICK pairs of one SemEval subset with their relatedness scores (1–5)."""
    lines = _lines(path)
    head = lines[0].split("\t") if lines else []
    wanted = ("sentence_A", "sentence_B", "relatedness_score", "SemEval_set")
    missing = [c for c in wanted if c not in head]
    if missing:
        raise DatasetError(f"{path}: header lacks the column(s) {missing}")
    ia, ib, ir, iset = (head.index(c) for c in wanted)
    a, b, scores = [], [], []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        row = line.split("\t")
        if len(row) != len(head):
            raise DatasetError(f"{path}:{n}: expected {len(head)} columns, got {len(row)}")
        if row[iset].strip() == subset:
            scores.append(_score(path, n, row[ir], 1, 5))
            a.append(row[ia])
            b.append(row[ib])
    return a, b, np.array(scores)


def read_expert(path: Path) -> list[tuple[str, str, float]]:
    """Flickr8k expert judgments: (image, caption id ``name#n``, mean of three 1–4 scores)."""
    out = []
    for n, cols in _rows(path):
        if len(cols) != 5 or "#" not in cols[1]:
            line = "\t".join(cols)
            raise DatasetError(
                f"{path}:{n}: expected '<image><TAB><image>#<n><TAB><score><TAB><score>"
                f"<TAB><score>', got {line[:80]!r}"
            )
        scores = [_score(path, n, c, 1, 4) for c in cols[2:5]]
        out.append((cols[0], cols[1], float(np.mean(scores))))
    return out
