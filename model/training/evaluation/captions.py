"""Scores of generated captions: the COCO caption metrics and the copy share.

BLEU-1..4, METEOR, CIDEr-D and ROUGE-L are pycocoevalcap's (the ``dev`` extra); without
Java our tokenizer is used, METEOR is ``None`` and ``notes`` says so.
"""

from __future__ import annotations

import contextlib
import io
import re
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from groundsearch.model.runtime.captioning import CaptionDecoder, rerank
from groundsearch.model.runtime.captioning.beam import Constraints
from groundsearch.model.runtime.captioning.rerank import EmbedTexts
from groundsearch.model.runtime.captioning.words import tokenize
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.training.evaluation.retrieval import summarize, t2i_ranks


def _tokenized(
    refs: Mapping[str, Sequence[str]], hyps: Mapping[str, str], notes: list[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """References and hypotheses tokenised by the PTB tokenizer, or our own without Java."""
    try:
        from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

        tok = PTBTokenizer()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            r = tok.tokenize({k: [{"caption": c} for c in v] for k, v in refs.items()})
            h = tok.tokenize({k: [{"caption": hyps[k]}] for k in refs})
        return r, h
    except Exception as exc:  # no Java: the same lower-cased words, punctuation dropped
        notes.append(f"PTB tokenizer unavailable ({type(exc).__name__}): words split by us")
        return (
            {k: [" ".join(tokenize(c)) for c in v] for k, v in refs.items()},
            {k: [" ".join(tokenize(hyps[k]))] for k in refs},
        )


def caption_scores(
    references: Mapping[str, Sequence[str]], generated: Mapping[str, str], meteor: bool = True
) -> dict[str, Any]:
    """BLEU-1..4, METEOR, CIDEr-D and ROUGE-L (×100) per key, and ``notes``."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    missing = set(references) - set(generated)
    if missing:
        raise ValueError(f"no generated sentence for {len(missing)} keys, e.g. {min(missing)}")
    notes: list[str] = []
    refs, hyps = _tokenized(references, generated, notes)
    out: dict[str, Any] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        bleu, _ = Bleu(4).compute_score(refs, hyps)
    out.update({f"BLEU-{n + 1}": 100 * float(b) for n, b in enumerate(bleu)})
    out["METEOR"] = _meteor(refs, hyps, notes) if meteor else None
    out["CIDEr-D"] = 100 * float(Cider().compute_score(refs, hyps)[0])
    out["ROUGE-L"] = 100 * float(Rouge().compute_score(refs, hyps)[0])
    out["notes"] = notes
    return out


def _meteor(
    refs: dict[str, list[str]], hyps: dict[str, list[str]], notes: list[str]
) -> float | None:
    try:
        from pycocoevalcap.meteor.meteor import Meteor

        return 100 * float(Meteor().compute_score(refs, hyps)[0])
    except Exception as exc:
        notes.append(f"METEOR unavailable ({type(exc).__name__}: {exc})")
        return None


def copy_share(generated: Iterable[str], training: Iterable[str]) -> float:
    """Percent of generated sentences whose words equal a training caption's."""
    seen = {tuple(tokenize(t)) for t in training}
    sentences = [tuple(tokenize(g)) for g in generated]
    return 100.0 * sum(s in seen for s in sentences) / max(len(sentences), 1)


def generated_retrieval(
    photo_vectors: np.ndarray, sentence_vectors: np.ndarray
) -> dict[str, float]:
    """R@1/5/10, median and mean rank of each photo by its own generated sentence."""
    scores = np.asarray(photo_vectors, np.float64) @ np.asarray(sentence_vectors, np.float64).T
    return summarize(t2i_ranks(scores, np.arange(len(photo_vectors))))


def mention_f1(
    generated: Sequence[str],
    references: Sequence[Sequence[str]],
    concepts: Mapping[str, Collection[str]],
) -> dict[str, Any]:
    """DCC's held-out-concept F1 (×100) per concept and averaged: positive when a
    reference mentions the concept, predicted when the generated sentence does."""
    from groundsearch.model.data.held_out_concepts import mentions

    per: dict[str, dict[str, float]] = {}
    for name, forms in concepts.items():
        truth = np.array([any(mentions(r, forms) for r in refs) for refs in references])
        said = np.array([mentions(g, forms) for g in generated])
        hit = int((truth & said).sum())
        p = hit / max(int(said.sum()), 1)
        r = hit / max(int(truth.sum()), 1)
        per[name] = {
            "photos": int(truth.sum()),
            "said": int(said.sum()),
            "precision": 100 * p,
            "recall": 100 * r,
            "F1": 100 * (2 * p * r / (p + r) if p + r else 0.0),
        }
    mean = float(np.mean([v["F1"] for v in per.values()])) if per else 0.0
    return {"mean_F1": mean, "concepts": per}


def main_noun(tree: DependencyTree) -> str | None:
    """A caption's noun lemma: of its subject, else its root, else its first noun."""
    nouns = [n for n in tree if n.upos in ("NOUN", "PROPN") and n.lemma.isalpha()]
    for rule in (lambda n: n.deprel.startswith("nsubj"), lambda n: n is tree.root):
        found = next((n for n in nouns if rule(n)), None)
        if found is not None:
            return found.lemma.lower()
    return nouns[0].lemma.lower() if nouns else None


def main_noun_share(generated: Sequence[str], references: Sequence[DependencyTree]) -> dict:
    """The share (×100) of generated sentences that name their reference's ``main_noun``
    (its lemma or written form), over the photos whose reference has one."""
    named, counted = 0, 0
    for text, tree in zip(generated, references, strict=True):
        lemma = main_noun(tree)
        if lemma is None:
            continue
        forms = {lemma} | {n.text.lower() for n in tree if n.lemma.lower() == lemma}
        counted += 1
        named += not forms.isdisjoint(re.findall(r"[a-z]+", text.lower()))
    return {"photos": counted, "named_%": 100.0 * named / max(counted, 1)}


def held_out_scores(
    generated: Sequence[str],
    references: Sequence[Sequence[str]],
    concepts: Mapping[str, Collection[str]],
    meteor: bool = True,
) -> dict[str, Any]:
    """The held-out-concept protocol's figures: mention F1, and the caption metrics on
    the photos whose references mention a held-out concept."""
    from groundsearch.model.data.held_out_concepts import mentions

    forms = {f for fs in concepts.values() for f in fs}
    rows = [i for i, refs in enumerate(references) if any(mentions(r, forms) for r in refs)]
    keys = [str(i) for i in rows]
    on = caption_scores(
        {k: references[i] for k, i in zip(keys, rows, strict=True)},
        {k: generated[i] for k, i in zip(keys, rows, strict=True)},
        meteor,
    )
    return {
        "mention": mention_f1(generated, references, concepts),
        "held_out_photos": len(rows),
        "on_held_out_photos": on,
    }


def collection_ciders(
    decoder: CaptionDecoder, groups: Sequence[tuple[np.ndarray, Sequence[Sequence[str]]]]
) -> list[float]:
    """CIDEr-D (×100) of the decoder's beam-3 sentences on each collection (photo vectors,
    their references), in order."""
    from pycocoevalcap.cider.cider import Cider

    decoder.eval()
    scores = []
    for vectors, references in groups:
        best = [b[0].text for b in decoder.generate(vectors, beam=3)]
        keys = [str(i) for i in range(len(best))]
        refs, hyps = _tokenized(
            dict(zip(keys, references, strict=True)), dict(zip(keys, best, strict=True)), []
        )
        scores.append(100 * float(Cider().compute_score(refs, hyps)[0]))
    return scores


def evaluate_decoder(
    decoder: CaptionDecoder,
    photo_vectors: np.ndarray,
    references: Sequence[Sequence[str]],
    training: Iterable[str],
    embed_texts: EmbedTexts | None = None,
    beam: int = 3,
    reranked: bool = False,
    meteor: bool = True,
    constraints: Constraints | None = None,
    **search: float,
) -> dict[str, Any]:
    """Caption each photo (the beam's best) and score it: caption metrics, copy share and,
    with ``embed_texts``, each photo's retrieval by its sentence."""
    if reranked and embed_texts is None:
        raise ValueError("re-ranking needs embed_texts")
    start = time.perf_counter()
    beams = decoder.generate(
        photo_vectors,
        beam=beam,
        constraints=constraints,
        **search,  # type: ignore[arg-type]
    )
    if reranked and embed_texts is not None:
        beams = rerank(photo_vectors, beams, embed_texts)
    seconds = time.perf_counter() - start
    best = [b[0].text for b in beams]
    keys = [str(i) for i in range(len(best))]
    out: dict[str, Any] = {"photos": len(best), "beam": beam, "reranked": reranked, **search}
    out.update(
        caption_scores(
            dict(zip(keys, references, strict=True)), dict(zip(keys, best, strict=True)), meteor
        )
    )
    out["copied_%"] = copy_share(best, training)
    out["distinct_%"] = 100.0 * len(set(best)) / max(len(best), 1)
    if embed_texts is not None:
        out["retrieval"] = generated_retrieval(photo_vectors, embed_texts(best))
    out["generate_seconds"] = seconds
    out["examples"] = best[:10]
    out["sentences"] = best
    return out
