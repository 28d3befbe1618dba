"""Choose how the classifier's words constrain the decoder, on a split (dev): for each
threshold (a word's classes' summed probability) and count (at most this many words per
photo, the sentence must contain one), the caption metrics of the best sentences and,
with ``--held-out``, the held-out-concept mention F1.

    python bench/novel_sweep.py --split dev [--decoder runs/captions/heldout.pt] \\
        [--held-out default] --thresholds 0.3,0.4,0.5,0.6,0.7 --counts 1,2,3

A photo's constrained sentences depend only on its constraint words, so each distinct
(photo, words) is searched once for the whole sweep. Photo vectors and features come
from the backbone's cached features (``groundsearch features``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from groundsearch.cli.common import make_parser
from groundsearch.common.settings import get_settings
from groundsearch.model.data import load_captioned_images
from groundsearch.model.data.held_out_concepts import HELD_OUT, resolve
from groundsearch.model.runtime.captioning import load_decoder
from groundsearch.model.runtime.captioning.novel import NovelWords
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.tagger import WordTagger
from groundsearch.model.training.evaluation.captions import caption_scores, held_out_scores

sys.path.insert(0, str(Path(__file__).parent))
from common import floats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="dev")
    ap.add_argument("--decoder", type=Path, help="default: the shipped one")
    ap.add_argument("--held-out", help="'default' or comma-separated concepts: mention F1")
    ap.add_argument("--thresholds", type=floats, default=[0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    ap.add_argument("--counts", type=lambda t: [int(x) for x in t.split(",")], default=[1, 2, 3])
    ap.add_argument(
        "--known",
        type=lambda t: [int(x) for x in t.split(",")],
        default=[0],
        help="the decoder's most frequent words left to it (a large number: only words it "
        "never learned are constrained)",
    )
    ap.add_argument(
        "--learned",
        type=floats,
        default=[0.7],
        help="thresholds for words the decoder learned (a word it never learned: --thresholds)",
    )
    ap.add_argument("--tagger", type=Path, help="a word tagger (model/artifacts/word_tagger.npz)")
    ap.add_argument(
        "--tagger-thresholds",
        type=floats,
        default=[0.25],
        help="with --tagger: thresholds for its words the decoder never learned",
    )
    ap.add_argument("--beam", type=int, default=3)
    ap.add_argument("--meteor", action="store_true", help="also METEOR (slower)")
    ap.add_argument("--json", type=Path, help="write every setting's figures here")
    args = ap.parse_args()

    s = get_settings()
    model = load_checkpoint(s.default_checkpoint, parser=make_parser().version)
    decoder = load_decoder(args.decoder or s.default_decoder)
    ds = load_captioned_images(s.flickr8k_dir, split=args.split)
    features = FeatureExtractor(model.backbone, cache_dir=s.cache_dir).embed_files(
        [ds.image_path(i) for i in range(len(ds.images))]
    )
    vectors = model.embed_images(features)
    refs = [ds.captions_of(i) for i in range(len(ds.images))]
    tagger = WordTagger.load(args.tagger, model.backbone) if args.tagger else None
    novel = NovelWords.for_decoder(decoder, model.backbone, tagger=tagger)
    pw = novel.word_probabilities(novel.probabilities(features))
    tw = novel.tag_probabilities(features)

    t0 = time.perf_counter()
    base = [b[0].text for b in decoder.generate(vectors, beam=args.beam)]
    base_seconds = time.perf_counter() - t0

    def words_of(row: int, t: float, c: int, kn: int, lt: float, tt: float) -> tuple[str, ...]:
        novel.known, novel.threshold, novel.learned_threshold = kn, t, lt
        novel.tagger_threshold, novel.count = tt, c
        return tuple(novel.pick(pw[row : row + 1], tw[row : row + 1])[0])

    settings = [
        (t, c, kn, lt, tt)
        for tt in (args.tagger_thresholds if tagger else [1.1])
        for lt in args.learned
        for kn in args.known
        for c in args.counts
        for t in args.thresholds
    ]
    wanted = {(row, words_of(row, *st)) for st in settings for row in range(len(ds.images))}
    pairs = sorted(p for p in wanted if p[1])
    t0 = time.perf_counter()
    found = decoder.generate(
        vectors[[r for r, _ in pairs]],
        beam=args.beam,
        constraints=novel.as_constraints([list(w) for _, w in pairs]),
    )
    constrained = {p: b[0].text for p, b in zip(pairs, found, strict=True)}
    seconds = time.perf_counter() - t0
    concepts = (
        resolve(HELD_OUT if args.held_out == "default" else args.held_out.split(","))
        if args.held_out
        else None
    )

    def score(sentences: list[str]) -> dict[str, float]:
        keys = [str(i) for i in range(len(sentences))]
        m = caption_scores(
            dict(zip(keys, refs, strict=True)), dict(zip(keys, sentences, strict=True)), args.meteor
        )
        out = {k: round(m[k], 2) for k in ("BLEU-4", "CIDEr-D", "METEOR") if m[k] is not None}
        if concepts:
            h = held_out_scores(sentences, refs, concepts, meteor=False)
            out["mention_F1"] = round(h["mention"]["mean_F1"], 2)
            out["held_out_CIDEr-D"] = round(h["on_held_out_photos"]["CIDEr-D"], 2)
        return out

    rows = [{"threshold": None, "count": 0, "constrained": 0, **score(base)}]
    print(json.dumps(rows[0]), flush=True)
    for t, c, kn, lt, tt in settings:
        sentences, n = [], 0
        for row in range(len(ds.images)):
            w = words_of(row, t, c, kn, lt, tt)
            sentences.append(constrained[(row, w)] if w else base[row])
            n += bool(w)
        setting = {"threshold": t, "learned": lt, "count": c, "known": kn}
        if tagger:
            setting["tagger_threshold"] = tt
        rows.append({**setting, "constrained": n, **score(sentences)})
        print(json.dumps(rows[-1]), flush=True)
    summary = {
        "split": args.split,
        "decoder": str(args.decoder or s.default_decoder),
        "photos": len(ds.images),
        "searches": len(pairs),
        "seconds_unconstrained": round(base_seconds, 1),
        "seconds_constrained": round(seconds, 1),
        "rows": rows,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
