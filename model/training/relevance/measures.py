"""A relevance model's figures on a split: calibration, AUROC, "no match", and the
reliability diagram."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from groundsearch.model.runtime.relevance import QUERY_KINDS, RelevanceModel
from groundsearch.model.training.relevance.pools import Pool, predict_pool
from groundsearch.model.training.relevance.queries import CaptionChecks, ConceptRun
from groundsearch.model.training.relevance.threshold import (
    caption_figures,
    caption_relevance,
    no_match_figures,
)

#: Bins of the expected calibration error and the reliability diagram.
BINS = 15


def calibration(p: np.ndarray, y: np.ndarray, bins: int = BINS) -> dict[str, Any]:
    """Expected calibration error and each equal-width bin's figures."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        m = which == b
        if not m.any():
            continue
        conf, rate = float(p[m].mean()), float(y[m].mean())
        ece += m.sum() / len(p) * abs(conf - rate)
        rows.append({"bin": b, "predicted": conf, "observed": rate, "hits": int(m.sum())})
    return {"ece": float(ece), "hits": len(p), "bins": rows}


def measure(
    pools: Mapping[str, Pool],
    runs: Sequence[ConceptRun],
    model: RelevanceModel,
    checks: CaptionChecks | None = None,
    short_threshold: float | None = None,
) -> dict[str, Any]:
    """The figures of ``model`` on a split's pools; "no match" of the single concepts at
    ``short_threshold`` when given, the caption queries at ``model.threshold``."""
    from sklearn.metrics import roc_auc_score

    out: dict[str, Any] = {"threshold": model.threshold}
    captions = {
        k: predict_pool(model, k, pools[k], ["captions"]) for k in ("text-image", "image-caption")
    }
    cal = {kind: calibration(p, y) for kind, (p, y, _) in captions.items()}
    p, y = (np.concatenate([c[i] for c in captions.values()]) for i in (0, 1))
    cal["captions, both directions"] = calibration(p, y)
    for kind in ("image-image", "arithmetic"):
        if kind in model.kinds and pools[kind].queries:
            p, y, _ = predict_pool(model, kind, pools[kind])
            cal[kind] = calibration(p, y)
    out["calibration"] = cal
    p, y, score = predict_pool(model, "text-image", pools["text-image"], ["concepts"])
    out["concepts_auroc"] = {
        "queries": len(runs),
        "hits": len(y),
        "relevant": int(y.sum()),
        "relevance": float(roc_auc_score(y, p)),
        "score": float(roc_auc_score(y, score)),
    }
    singles = [r for r in runs if r.single]
    ps = np.concatenate([r.judge(model) for r in singles])
    ys = np.concatenate([[int(i) in r.relevant for i in r.present_idx] for r in singles])
    ss = np.concatenate([r.present_scores for r in singles])
    out["concepts_auroc"]["single"] = {
        "relevance": float(roc_auc_score(ys, ps)),
        "score": float(roc_auc_score(ys, ss)),
    }
    short = model.threshold if short_threshold is None else short_threshold
    out["short_threshold"] = short
    out["no_match"] = no_match_figures(runs, model, short)
    if checks is not None:
        out["caption_queries"] = caption_figures(
            checks, caption_relevance(checks, model), model.threshold
        )
    out["no_match"]["per_query"] = [
        {
            "query": r.query.text,
            "relevant": len(r.relevant),
            "evidence": r.present_evidence is not None and bool(model.evidence),
            "absent_best": round(float(r.judge(model, present=False).max()), 3),
            "present_top5": [round(float(v), 3) for v in r.judge(model)[:5]],
            "present_top5_relevant": [int(i) in r.relevant for i in r.present_idx[:5]],
        }
        for r in singles
    ]
    return out


def reliability_figure(figures: Mapping[str, Any], path: Any) -> None:
    """The reliability diagram of ``measure``'s calibration (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("full models (galleries of 20+ photos)", figures["calibration"])]
    if "score_only" in figures:
        panels.append(("score-only models (< 20 photos)", figures["score_only"]["calibration"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 5.0), dpi=110)
    for ax, (title, cal) in zip(np.atleast_1d(axes), panels, strict=True):
        ax.plot([0, 1], [0, 1], color="0.7", lw=1, ls="--", label="perfect")
        for kind in (k for k in QUERY_KINDS if k in cal):
            rows = cal[kind]["bins"]
            ax.plot(
                [r["predicted"] for r in rows],
                [r["observed"] for r in rows],
                marker="o",
                ms=3,
                label=f"{kind} (ECE {cal[kind]['ece']:.3f}, {cal[kind]['hits']} hits)",
            )
        ax.set_xlabel("relevance (predicted probability)")
        ax.set_ylabel("observed share relevant")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(f"Relevance reliability, Flickr8k test (top-20 hits)\n{title}", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
