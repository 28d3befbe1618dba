"""Everyday words against a Flickr8k split: does relevance say "no match" for the
objects the split's photos lack, and keep the ones they hold?

    python bench/everyday_words.py --split test --out runs/bench/everyday-test.json
    python bench/everyday_words.py --split dev
    # as for a gallery indexed before photos' classes were stored (the tagger alone):
    groundsearch fit-relevance --nouns none --out /tmp/r.json
    python bench/everyday_words.py --relevance /tmp/r.json --nouns none
    # with the object detector's evidence (bench/detector/; measured, not shipped):
    python bench/object_detector.py fit-relevance --out /tmp/o.json
    python bench/everyday_words.py --relevance /tmp/o.json --objects

The words (``model.training.evaluation.everyday``, which `fit-relevance` reads too) are
COCO's 80 object categories said as one everyday word ("hydrant", "teddy",
"phone") with the open-vocabulary check's words (``CONCEPT_WORDS``): the objects of the
photos users keep, not chosen from Flickr8k. A word is *absent* from the split when no
caption of its photos uses it (or its plural), *present* when captions of at least 3 of
its photos do; the others are left out. Each word is asked as "a WORD" ("snow", "coffee"…
bare) against every photo of the split, ranked as ``/search`` ranks (a short query fused
with its evidence) and judged as the service judges a query's window (the
shipped relevance model, evidence from the vector tagger when the word is one of its
nouns, and the classifier's from each photo's top classes when it names the word).
Reported: the share of absent
words answered "no match" (no hit at the default threshold), of present words answered
"no match", and of present words' relevant top-5 hits kept. The labels are the captions':
a photo may show a cup no caption names. (docs/RESULTS.md, "Everyday words".)

With ``--ranking`` it scores the rankings instead (``model.training.evaluation.
short_queries``): each word asked "WORD", "a WORD" and in two-to-three-word phrases,
P@5, P@10 and average precision over the whole split beside their ceilings, by the joint
score alone and as served (short queries fused with their evidence, ``fusion.json``):

    python bench/everyday_words.py --ranking --split test --out runs/bench/short-test.json
    python bench/everyday_words.py --ranking --source cc-web --split dev

Captions name what their writers noticed, not all a photo shows. ``--judged FILE`` adds
photos judged by eye to show a word (``bench/judgments/``) to that word's relevant photos
("WORD" and "a WORD"; unjudged hits still count by the captions: a floor) and reports the
tables again as ``*_judged``; ``--sheets DIR`` draws the "a WORD" queries' top-5 page hits
that neither the captions nor FILE settle, to judge (``DIR/sheet-N.png``, ``DIR/unjudged.json``):

    python bench/everyday_words.py --ranking --judged bench/judgments/flickr8k-test.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from groundsearch.cli.common import checkpoint_path, data_option, source_of
from groundsearch.cli.relevance import command_fusion, embedded_split, nouns_table
from groundsearch.common.settings import get_settings
from groundsearch.model.data.held_out_concepts import photos_mentioning
from groundsearch.model.runtime.checkpoints import checkpoint_identity
from groundsearch.model.runtime.fusion import ranked_relevance
from groundsearch.model.runtime.relevance import features, load_relevance, novelty_of, word_count
from groundsearch.model.training.evaluation.everyday import PRESENT, everyday_queries
from groundsearch.model.training.evaluation.short_queries import (
    ShortQuery,
    ranking_figures,
    short_queries,
    table,
)

sys.path.insert(0, str(Path(__file__).parent))
from detector.relevance import detector_split


def ask(args: argparse.Namespace) -> dict[str, Any]:
    """Every word asked and judged on the split (see the module docstring)."""
    path = Path(args.relevance) if args.relevance else get_settings().space_dir / "relevance.json"
    relevance = load_relevance(path, checkpoint_identity(checkpoint_path(args)))
    embed = detector_split if args.objects else embedded_split
    model, data, parse = embed(args, args.split, source_of(args))
    queries = everyday_queries()
    trees = parse([q.text for q in queries])
    vectors = model.embed_sentences(trees)
    rows = []
    for q, tree, vector, row in zip(
        queries, trees, vectors, data.text_scores(vectors), strict=True
    ):
        word, text = q.concept, q.text
        shown = photos_mentioning(data.ds, *q.groups)
        if 0 < len(shown) < PRESENT:
            continue
        # as /search ranks and judges: every photo of the split (its window), best first
        idx, scores = data.ranked(row, tree, len(row))
        evidence = data.evidence(data.query_nouns(tree), idx)
        judge = relevance if evidence is not None else relevance.without_evidence()
        threshold = relevance.default_threshold(evidence=evidence is not None)
        table = features(
            scores, novelty_of(vector, data.channel_columns), relevance.top,
            word_count(text), evidence,
        )  # fmt: skip
        p = judge.model_for("text-image", judge.top, evidence is not None).predict(table)
        top5 = [int(i) in shown for i in idx[:5]]
        rows.append(
            {
                "word": word,
                "photos": len(shown),
                "evidence": evidence is not None,
                "best": round(float(p.max()), 3),
                "threshold": threshold,
                "no_match": bool(p.max() < threshold),
                "relevant_top5": int(sum(top5)),
                "kept_top5": int(sum(p[:5][np.array(top5)] >= threshold)),
            }
        )
    absent = [r for r in rows if r["photos"] == 0]
    present = [r for r in rows if r["photos"] >= PRESENT]
    relevant = sum(r["relevant_top5"] for r in present)
    return {
        "split": args.split,
        "relevance": str(path),
        "nouns": args.nouns,
        "objects": args.objects,
        "absent": len(absent),
        "absent_no_match": float(np.mean([r["no_match"] for r in absent])) if absent else 0.0,
        "present": len(present),
        "present_no_match": float(np.mean([r["no_match"] for r in present])) if present else 0.0,
        "present_relevant_top5": relevant,
        "present_kept": sum(r["kept_top5"] for r in present) / relevant if relevant else 0.0,
        "words": rows,
    }


def sentence_recalls(data: Any, scores: np.ndarray) -> dict[str, float]:
    """Text -> image R@1, R@5, R@10 (percent) of the captions' own photos."""
    own = data.caption_image
    ranks = (scores > scores[np.arange(len(own)), own][:, None]).sum(axis=1)
    return {f"r@{k}": round(float(100 * (ranks < k).mean()), 2) for k in (1, 5, 10)}


def ranked_scores(data: Any, vectors: np.ndarray, trees: Any) -> np.ndarray:
    """``data.text_scores`` with each short query's row fused with its evidence, as served."""
    scores = data.text_scores(vectors)
    return np.stack([data.fused(row, t) for row, t in zip(scores, trees, strict=True)])


def page_order(
    data: Any, relevance: Any, text: str, tree: Any, vector: np.ndarray, row: np.ndarray
) -> np.ndarray:
    """A query's photos in the order the page lists them: its good matches (relevance at
    or above the default threshold; a fused query's ``ranked_relevance``) in the served
    order, then the rest."""
    idx, joint = data.ranked(row, tree, len(row))
    nouns = data.query_nouns(tree)
    evidence = data.evidence(nouns, idx)
    novelty, words = novelty_of(vector, data.channel_columns), word_count(text)
    p = relevance.predict("text-image", joint, novelty, words, evidence)
    if data.fused(row, tree) is not row:
        p = ranked_relevance(p)
    good = p >= relevance.default_threshold(evidence is not None, words)
    order = np.concatenate([idx[good], idx[~good]])
    out = np.empty(len(row))
    out[order] = -np.arange(len(row), dtype=np.float64)
    return out


def rank(args: argparse.Namespace) -> dict[str, Any]:
    """The short queries' rankings, by the joint score and as served (module docstring)."""
    path = Path(args.relevance) if args.relevance else get_settings().space_dir / "relevance.json"
    relevance = load_relevance(path, checkpoint_identity(checkpoint_path(args)))
    args.objects = args.fusion != "none"  # the detector's channel of the served fusion
    model, data, parse = embedded_split(args, args.split, source_of(args))
    queries = short_queries(data.ds, data.trees)
    trees = parse([q.text for q in queries])
    vectors = model.embed_sentences(trees)
    joint = data.text_scores(vectors)
    served = ranked_scores(data, vectors, trees)
    page = [
        page_order(data, relevance, q.text, t, v, row)
        for q, t, v, row in zip(queries, trees, vectors, joint, strict=True)
    ]
    judged: dict[str, Any] = {}
    if args.judged or args.sheets:
        shows, seen = judgments(args.judged, data.ds.images)
        if args.judged:
            eyed = [judged_query(q, shows) for q in queries]
            judged = {
                "served_judged": table(eyed, lambda i: served[i]),
                "page_judged": table(eyed, lambda i: page[i]),
            }
        if args.sheets:
            draw_unjudged(args.sheets, data.ds, queries, page, seen)
    return judged | {
        "split": args.split,
        "source": str(source_of(args)),
        "fusion": str(command_fusion(args)[0]),
        "joint": table(queries, lambda i: joint[i]),
        "served": table(queries, lambda i: served[i]),
        # as the page lists them: good matches first (relevance >= the default threshold)
        "page": table(queries, lambda i: page[i]),
        # the split's captions as sentence queries: text -> image R@1, R@5, R@10
        "sentences_joint": sentence_recalls(data, data.text_scores(data.captions)),
        "sentences_served": sentence_recalls(data, ranked_scores(data, data.captions, data.trees)),
        "queries": [
            {
                "text": q.text,
                "form": q.form,
                "relevant": len(q.relevant),
                "joint": ranking_figures(joint[i], q.relevant),
                "served": ranking_figures(served[i], q.relevant),
                "page": ranking_figures(page[i], q.relevant),
            }
            for i, q in enumerate(queries)
        ],
    }


def judgments(
    path: Path | None, images: list[str]
) -> tuple[dict[str, set[int]], set[tuple[str, int]]]:
    """The photos a judgments file says show each word, and every (word, photo) it judged."""
    if path is None:
        return {}, set()
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    row = {name: i for i, name in enumerate(images)}
    named = {n for key in ("shows", "lacks") for names in d[key].values() for n in names}
    if missing := sorted(named - row.keys()):
        raise SystemExit(
            f"{path} judges photos this split lacks ({missing[0]}, …): another split's"
        )
    shows = {w: {row[n] for n in names} for w, names in d["shows"].items()}
    seen = {(w, row[n]) for key in ("shows", "lacks") for w, names in d[key].items() for n in names}
    return shows, seen


def judged_query(q: ShortQuery, shows: dict[str, set[int]]) -> ShortQuery:
    """``q`` with the photos judged to show its word relevant too (not for phrases)."""
    if q.form == "phrase" or q.word not in shows:
        return q
    return ShortQuery(q.text, q.word, q.form, q.relevant | frozenset(shows[q.word]))


def draw_unjudged(
    out: Path,
    ds: Any,
    queries: list[ShortQuery],
    page: list[np.ndarray],
    seen: set[tuple[str, int]],
) -> None:
    """Contact sheets of the "a WORD" queries' top-5 page hits left to judge."""
    from PIL import Image, ImageDraw

    todo = [
        (q.word, int(i))
        for q, scores in zip(queries, page, strict=True)
        if q.form == "a word"
        for i in np.argsort(-scores, kind="stable")[:5]
        if int(i) not in q.relevant and (q.word, int(i)) not in seen
    ]
    out.mkdir(parents=True, exist_ok=True)
    width, height, columns, per = 300, 246, 4, 16
    for s in range(0, len(todo), per):
        part = todo[s : s + per]
        sheet = Image.new("RGB", (width * columns, height * -(-len(part) // columns)), "white")
        draw = ImageDraw.Draw(sheet)
        for k, (word, i) in enumerate(part):
            x, y = k % columns * width, k // columns * height
            with Image.open(ds.image_path(i)) as im:
                photo = im.convert("RGB")
            photo.thumbnail((width - 6, height - 20))
            sheet.paste(photo, (x, y + 16))
            draw.text((x + 2, y + 2), f"#{s + k} {word}", fill="black")
        sheet.save(out / f"sheet-{s // per}.png")
    rows = [{"n": n, "word": w, "photo": ds.images[i]} for n, (w, i) in enumerate(todo)]
    (out / "unjudged.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(f"{len(todo)} hits to judge: {out}/sheet-*.png, {out}/unjudged.json", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="test")
    ap.add_argument("--relevance", help="the relevance model (default: the shipped one)")
    ap.add_argument(
        "--nouns",
        type=nouns_table,
        help="the noun -> classes table of the classifier's evidence (default: the shipped "
        "one; 'none': the tagger's evidence alone)",
    )
    ap.add_argument(
        "--objects",
        action="store_true",
        help="with the object detector's evidence too (bench/detector/; fit the relevance "
        "with python bench/object_detector.py fit-relevance)",
    )
    ap.add_argument(
        "--ranking",
        action="store_true",
        help="score the short queries' rankings (P@5, P@10, AP), joint and as served",
    )
    ap.add_argument(
        "--fusion", help="the fusion as served (default: the shipped one; 'none': joint only)"
    )
    ap.add_argument("--judged", type=Path, help="photos judged by eye (bench/judgments/)")
    ap.add_argument("--sheets", type=Path, help="draw the top-5 hits left to judge here")
    ap.add_argument("--out", type=Path)
    data_option(ap)
    args = ap.parse_args()
    args.checkpoint, args.data, args.evidence, args.tagger = None, None, True, None
    result = rank(args) if args.ranking else ask(args)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    summary = {k: v for k, v in result.items() if k not in ("words", "queries")}
    print(json.dumps(summary, indent=1))
    for r in result.get("words", []):
        if (r["photos"] == 0) != r["no_match"]:  # an absent word answered, a present one not
            print(f"  {r['word']}: {r['photos']} photos, best {r['best']} at {r['threshold']}")


if __name__ == "__main__":
    main()
