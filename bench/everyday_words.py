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
bare) against every photo of the split and judged as the service judges a query (the
shipped relevance model, evidence from the vector tagger when the word is one of its
nouns, and the classifier's from each photo's top classes when it names the word).
Reported: the share of absent
words answered "no match" (no hit at the default threshold), of present words answered
"no match", and of present words' relevant top-5 hits kept. The labels are the captions':
a photo may show a cup no caption names. (docs/RESULTS.md, "Everyday words".)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from groundsearch.cli.common import checkpoint_path, data_option, source_of
from groundsearch.cli.relevance import embedded_split, nouns_table
from groundsearch.common.settings import get_settings
from groundsearch.model.data.held_out_concepts import photos_mentioning
from groundsearch.model.runtime.checkpoints import checkpoint_identity
from groundsearch.model.runtime.relevance import features, load_relevance, novelty_of, word_count
from groundsearch.model.training.evaluation.everyday import PRESENT, everyday_queries
from groundsearch.model.training.relevance import full_model, top_of

sys.path.insert(0, str(Path(__file__).parent))
from detector.relevance import detector_split


def ask(args: argparse.Namespace) -> dict[str, Any]:
    """Every word asked and judged on the split (see the module docstring)."""
    path = Path(args.relevance) if args.relevance else get_settings().model_dir / "relevance.json"
    relevance = load_relevance(path, checkpoint_identity(checkpoint_path(args)))
    embed = detector_split if args.objects else embedded_split
    model, data, parse = embed(args, args.split, source_of(args))
    queries = everyday_queries()
    trees = parse([q.text for q in queries])
    vectors = model.embed_sentences(trees)
    rows = []
    scores_of = data.text_scores(vectors)  # as /search scores them
    for q, tree, vector, row in zip(queries, trees, vectors, scores_of, strict=True):
        word, text = q.concept, q.text
        shown = photos_mentioning(data.ds, *q.groups)
        if 0 < len(shown) < PRESENT:
            continue
        idx, scores = top_of(row[None, :], relevance.top)
        evidence = data.evidence(data.query_nouns(tree), idx[0])
        judge = relevance if evidence is not None else relevance.without_evidence()
        threshold = relevance.default_threshold(evidence=evidence is not None)
        table = features(
            scores[0], novelty_of(vector, data.channel_columns), relevance.top,
            word_count(text), evidence,
        )  # fmt: skip
        p = full_model(judge, "text-image", evidence is not None).predict(table)
        top5 = [int(i) in shown for i in idx[0][:5]]
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
    ap.add_argument("--out", type=Path)
    data_option(ap)
    args = ap.parse_args()
    args.checkpoint, args.data, args.evidence, args.tagger = None, None, True, None
    result = ask(args)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    summary = {k: v for k, v in result.items() if k != "words"}
    print(json.dumps(summary, indent=1))
    for r in result["words"]:
        if (r["photos"] == 0) != r["no_match"]:  # an absent word answered, a present one not
            print(f"  {r['word']}: {r['photos']} photos, best {r['best']} at {r['threshold']}")


if __name__ == "__main__":
    main()
