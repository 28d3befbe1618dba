"""Would a *rival* class help relevance tell a concept from its look-alikes? A probe.

The held-out concepts' absent galleries answer with look-alikes: a small dog for "a cat",
a mountain bike for "a motorcycle". The classifier often sees the rival ("whippet",
"mountain bike"), so a hit's *rival mass* — the probability among its top classes on
classes that are not the query's nouns' but of the same half of ImageNet (animals 0–397
or things 398–999; ``--animals``: only for animal nouns) — might count against it. This
probe reads the shipped relevance on the concept queries' hits (``groundsearch
evaluate-relevance``'s runs), fits on dev a logistic regression of the label on
(logit relevance, rival mass) and reports the pooled AUROC of the present galleries'
hits and each single concept's best absent hit, dev and test:

    python bench/rival_classes.py [--animals]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from groundsearch.cli.common import checkpoint_path, source_of
from groundsearch.cli.relevance import embedded_split
from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.checkpoints import checkpoint_identity
from groundsearch.model.runtime.evidence import noun_words
from groundsearch.model.runtime.relevance import load_relevance
from groundsearch.model.training.relevance import gather

ANIMALS = 398  # ImageNet classes 0–397 are animals


def rival_mass(ids: np.ndarray, probs: np.ndarray, own: set[int], animals_only: bool) -> float:
    """The probability among a hit's top classes on classes of the query's half of
    ImageNet that are not the query's own (0 for a query without classes)."""
    if not own:
        return 0.0
    animal = all(c < ANIMALS for c in own)
    if animals_only and not animal:
        return 0.0
    same_half = (ids < ANIMALS) == animal
    return float(probs[same_half & ~np.isin(ids, list(own))].sum())


def split_rows(split: str, animals_only: bool) -> list[dict]:
    args = argparse.Namespace(
        checkpoint=None, data=None, source=None, default_sources="flickr8k", nouns=None,
        tagger=None, evidence=True,
    )  # fmt: skip
    path = get_settings().model_dir / "relevance.json"
    rel = load_relevance(Path(path), checkpoint_identity(checkpoint_path(args)))
    model, data, parse = embedded_split(args, split, source_of(args))
    _, runs, _ = gather(data, model.embed_sentences, parse)  # the protocol's labels, kinds too
    judged = replace(rel, threshold=rel.default_threshold(evidence=True))
    ids, probs = data.classes
    rows = []
    for r in runs:
        named = data.nouns.named(noun_words(parse([r.query.text])[0]))
        own = set().union(*(data.nouns.classes[n] for n in named)) if named else set()
        for present in (True, False):
            idx = r.present_idx if present else r.absent_idx
            p = r.judge(judged, present=present)
            for j, i in enumerate(idx):
                rows.append(
                    {
                        "query": r.query.text,
                        "single": r.single,
                        "present": present,
                        "rank": j,
                        "relevance": float(p[j]),
                        "label": int(present and int(i) in r.relevant),
                        "rival": rival_mass(ids[i], probs[i], own, animals_only),
                    }
                )
    return rows


def columns(rows: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = np.clip([r["relevance"] for r in rows], 1e-3, 1 - 1e-3)
    x = np.column_stack([np.log(p / (1 - p)), [r["rival"] for r in rows]])
    return x, np.array([r["label"] for r in rows]), p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--animals", action="store_true", help="rival mass for animal nouns only")
    a = ap.parse_args()
    data = {s: split_rows(s, a.animals) for s in ("dev", "test")}
    x, y, _ = columns(data["dev"])
    fit = LogisticRegression().fit(x, y)
    print(f"fitted on dev: coef (logit relevance, rival) {fit.coef_[0].round(3).tolist()}")
    for split, rows in data.items():
        x, y, p = columns(rows)
        new = fit.predict_proba(x)[:, 1]
        present = np.array([r["present"] for r in rows])
        before = roc_auc_score(y[present], p[present])
        after = roc_auc_score(y[present], new[present])
        print(f"{split}: present hits' AUROC {before:.4f}, with the rival mass {after:.4f}")
        for q in sorted({r["query"] for r in rows if r["single"]}):
            absent = [i for i, r in enumerate(rows) if r["query"] == q and not r["present"]]
            print(f"  {q:14s} best absent hit {p[absent].max():.3f} -> {new[absent].max():.3f}")


if __name__ == "__main__":
    main()
