"""The per-pair table and pictures of ``photo − "A" + "B"`` examples for docs/RESULTS.md,
from the JSON that ``groundsearch evaluate-arithmetic --examples N`` writes.

    python bench/arithmetic_examples.py runs/issue15/arith-sdt-rnn.json \\
        runs/issue15/arith-bow.json                                   # markdown table
    python bench/arithmetic_examples.py runs/issue15/arith-sdt-rnn.json \\
        runs/issue15/arith-bow.json --pair "beach→snow" --example 0 --out docs/img/x.jpg

One strip per example: the start photo, then a row of the top five for the arithmetic
query of each JSON (one per model), then the text "B" alone and the photo alone (of the
first JSON). A green frame marks a photo whose captions mention B, a red one a photo
whose captions do not. Thumbnails are small (``--size``, 96 px) JPEGs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageOps

from groundsearch.common.settings import get_settings
from groundsearch.model.training.evaluation.arithmetic import stratified_interval

sys.path.insert(0, str(Path(__file__).parent))
from common import markdown_table

LABEL_WIDTH = 150
GREEN, RED, WHITE, BLACK = (34, 139, 34), (200, 30, 30), (255, 255, 255), (0, 0, 0)


def _example(result: dict, pair: str, index: int, path: Path) -> dict:
    for row in result.get("pairs", []):
        if row.get("pair") == pair:
            shown = row.get("examples", [])
            if index >= len(shown):
                raise SystemExit(f"{path}: {pair} lists {len(shown)} examples, not {index + 1}")
            return {**shown[index], "a": row["a"], "b": row["b"]}
    raise SystemExit(
        f"{path}: no pair {pair!r} (pairs: {[r.get('pair') for r in result['pairs']]})"
    )


def _thumb(images: Path, name: str, size: int, frame: tuple[int, int, int] | None) -> Image.Image:
    with Image.open(images / name) as im:
        thumb = ImageOps.exif_transpose(im).convert("RGB")
        thumb = thumb.resize((size, size), Image.Resampling.BICUBIC)
    if frame is not None:
        ImageDraw.Draw(thumb).rectangle([0, 0, size - 1, size - 1], outline=frame, width=4)
    return thumb


def strip(results: list[tuple[str, dict]], pair: str, index: int, images: Path, size: int):
    """The picture of one example: rows of (label, photos, has-B flags)."""
    first_path, first = results[0]
    ex = _example(first, pair, index, Path(first_path))
    a, b = ex["a"], ex["b"]
    rows = [(f'start: "{a}"', [ex["start"]], [None])]
    for path, result in results:
        other = _example(result, pair, index, Path(path))
        if other["start"] != ex["start"]:
            raise SystemExit(f"{path}: example {index} starts from another photo")
        model = result.get("encoder", Path(path).stem)
        rows.append(
            (f'{model}:\nphoto - "{a}" + "{b}"', other["arithmetic"], other["has_b"]["arithmetic"])
        )
    rows.append((f'text "{b}" alone', ex["text"], ex["has_b"]["text"]))
    rows.append(("photo alone", ex["photo"], ex["has_b"]["photo"]))
    gap = 4
    width = LABEL_WIDTH + 5 * (size + gap)
    canvas = Image.new("RGB", (width, len(rows) * (size + gap)), WHITE)
    draw = ImageDraw.Draw(canvas)
    for r, (label, names, flags) in enumerate(rows):
        y = r * (size + gap)
        draw.multiline_text((4, y + size // 3), label, fill=BLACK)
        for c, (name, flag) in enumerate(zip(names, flags, strict=True)):
            frame = None if flag is None else (GREEN if flag else RED)
            canvas.paste(_thumb(images, name, size, frame), (LABEL_WIDTH + c * (size + gap), y))
    return canvas


def _cell(row: dict, query: str, key: str) -> str:
    value = row.get(query, {}).get(key) if isinstance(row.get(query), dict) else None
    return f"{value:.1f}" if isinstance(value, int | float) else "–"


def table(results: list[tuple[str, dict]]) -> str:
    """Markdown: per pair, the share of B (and of A) in the top k of each query, one
    column group per model, then the mean over the pairs that pass the rule."""
    models = [r.get("encoder", Path(p).stem) for p, r in results]
    head = ["pair", "starts", "photos of B"]
    for m in models:
        head += [f"{m}: arith. B", f"{m}: arith. A", f"{m}: text B", f"{m}: photo B"]
    rows: list[list[str]] = []
    by_pair = [{row["pair"]: row for row in r["pairs"]} for _, r in results]
    for row in results[0][1]["pairs"]:
        label = row["pair"] + (" (skipped)" if "skipped" in row else "")
        cells = [label, str(row["starts"]), str(row["photos_with_b"])]
        for pairs in by_pair:
            other = pairs.get(row["pair"], {})
            cells += [_cell(other, "arithmetic", "share_b"), _cell(other, "arithmetic", "share_a")]
            cells += [_cell(other, "text", "share_b"), _cell(other, "photo", "share_b")]
        rows.append(cells)
    cells = [f"**mean of {results[0][1]['mean']['pairs']}**", "", ""]
    for _, r in results:
        mean = r["mean"]
        cells += [_cell(mean, "arithmetic", "share_b"), _cell(mean, "arithmetic", "share_a")]
        cells += [_cell(mean, "text", "share_b"), _cell(mean, "photo", "share_b")]
    rows.append(cells)
    return "\n".join(markdown_table(head, rows)) + "\n"


QUERY_LABELS = {
    "arithmetic": 'photo − "A" + "B"',
    "plus_only": 'photo + "B"',
    "text": '"B" alone',
    "photo": "photo alone",
}


def mean_table(results: list[tuple[str, dict]]) -> str:
    """Markdown: per model and query, the mean over the pairs of the share of B, the
    share of A and the likeness to the start photo."""
    head = ["model", "query", "photos of B in top k", "95% CI", "photos of A in top k"]
    head.append("likeness")
    rows: list[list[str]] = []
    for path, r in results:
        mean, model = r["mean"], r.get("encoder", Path(path).stem)
        for query, label in QUERY_LABELS.items():
            if query in mean:
                span = mean.get("ci95", {}).get(query)
                ci = f"{span[0]:.1f}–{span[1]:.1f}" if isinstance(span, list) else "–"
                cells = [model, label, _cell(mean, query, "share_b"), ci]
                cells += [_cell(mean, query, "share_a"), _cell(mean, query, "likeness")]
                rows.append(cells)
        any_two = mean.get("likeness_any_two")
        if isinstance(any_two, int | float):
            rows.append([model, "two photos at random", "–", "–", "–", f"{any_two:.1f}"])
    return "\n".join(markdown_table(head, rows)) + "\n"


def paired_difference(
    first: dict[str, Any], second: dict[str, Any], query: str = "arithmetic"
) -> dict[str, Any]:
    """``second − first``: the mean per-start difference in the share of B over their
    common pairs (same split), with its stratified bootstrap interval."""
    rows = {r["pair"]: r for r in first["pairs"] if "skipped" not in r}
    diffs = []
    for row in second["pairs"]:
        other = rows.get(row["pair"])
        if other is None or "skipped" in row:
            continue
        a, b = other.get("per_start", {}).get(query), row.get("per_start", {}).get(query)
        if a is None or b is None or len(a) != len(b):
            raise ValueError(f"{row['pair']}: the two results do not share their start photos")
        diffs.append(np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64))
    if not diffs:
        raise ValueError("the two results have no scored pair in common")
    return {
        "query": query,
        "pairs": len(diffs),
        "difference": float(np.mean([d.mean() for d in diffs])),
        "ci95": stratified_interval(diffs),
        "pairs_higher": int(sum(d.mean() > 0 for d in diffs)),
    }


def difference_line(results: list[tuple[str, dict]]) -> str:
    """The second model's lead over the first in the arithmetic's share of B, start photo
    by start photo, with its interval; empty with fewer than two results."""
    if len(results) < 2:
        return ""
    (path_a, a), (path_b, b) = results[:2]
    try:
        diff = paired_difference(a, b)
    except ValueError as exc:
        return f"no paired difference: {exc}\n"
    name_a, name_b = (r.get("encoder", Path(p).stem) for p, r in ((path_a, a), (path_b, b)))
    low, high = diff["ci95"]
    return (
        f"{name_b} − {name_a}, photos of B in the arithmetic's top k: "
        f"{diff['difference']:+.1f} points (95% CI {low:+.1f} to {high:+.1f}; start photos "
        f"resampled within pairs), higher on {diff['pairs_higher']} of {diff['pairs']} pairs\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path, help="evaluate-arithmetic JSON files")
    ap.add_argument("--pair", help='draw this pair, e.g. "beach→snow" (default: the table)')
    ap.add_argument("--example", type=int, default=0, help="which listed start photo (0-based)")
    ap.add_argument("--size", type=int, default=96, help="thumbnail side in pixels")
    ap.add_argument("--out", type=Path, help="JPEG to write (with --pair)")
    args = ap.parse_args(argv)
    results = []
    for path in args.results:
        try:
            results.append((str(path), json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, json.JSONDecodeError) as exc:
            raise SystemExit(f"cannot read {path}: {exc}") from None
    if args.pair is None:
        print(mean_table(results) + "\n" + difference_line(results) + "\n" + table(results), end="")
        return 0
    if args.out is None:
        raise SystemExit("--pair needs --out (the JPEG to write)")
    images = Path(results[0][1].get("data") or get_settings().flickr8k_dir) / "Images"
    picture = strip(results, args.pair, args.example, images, args.size)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    picture.save(args.out, "JPEG", quality=80, optimize=True)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} kB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
