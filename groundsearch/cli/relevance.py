"""``groundsearch fit-relevance`` and ``evaluate-relevance``: the calibrated relevance
model (``model.runtime.relevance``), fitted on Flickr8k dev and measured on test."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from groundsearch.cli.common import (
    checkpoint_argument,
    checkpoint_path,
    command,
    data_option,
    json_text,
    loaded_model,
    sources_of,
    user_errors,
)
from groundsearch.common.settings import get_settings

T = TypeVar("T")

if TYPE_CHECKING:
    from groundsearch.model.runtime.fusion import Fusion
    from groundsearch.model.runtime.hubness import Hubness

COMMANDS = ("fit-relevance", "fit-fusion", "evaluate-relevance")


def gathered_splits(args: argparse.Namespace) -> tuple[Any, list[Any], Any, Any]:
    """The checkpoint's model, the ``--split`` of each ``--source`` embedded (``SplitData``),
    the text parse and the splits' queries asked (``gather_all``: pools, runs, checks)."""
    from groundsearch.model.training.relevance import gather_all

    embedded = [embedded_split(args, args.split, source) for source in sources_of(args)]
    model, parse, datas = embedded[-1][0], embedded[-1][2], [data for _, data, _ in embedded]
    gathered = gather_all(datas, model.embed_sentences, parse, concepts=_concepts(args))
    return model, datas, parse, gathered


def embedded_split(args: argparse.Namespace, split: str, source: Any) -> tuple[Any, Any, Any]:
    """The checkpoint's model, one collection's split embedded and the text parse."""
    from groundsearch.model.data.sources import load_source
    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.runtime.concepts import ConceptChannel, ConceptConfig
    from groundsearch.model.runtime.evidence import NounClasses, top_classes
    from groundsearch.model.runtime.tagger import VECTORS_FILE_NAME, WordTagger, vectors_identity
    from groundsearch.model.training.corpus import photo_features
    from groundsearch.model.training.relevance import SplitData

    s = get_settings()
    model, extractor, parse = loaded_model(args)
    ds = load_source(source, split, extractor.identity)
    trees = parse(list(ds.captions))
    features = photo_features(ds, extractor, progress=True)
    photos = model.embed_images(features)
    captions = model.embed_sentences(trees)
    columns = int(getattr(model, "channel_columns", 0))
    classes, nouns, tagger = None, None, None
    if getattr(args, "evidence", True):
        channel = getattr(model, "concepts", None) or ConceptChannel(
            model.backbone, ConceptConfig()
        )
        table = getattr(args, "nouns", None)
        if table != "none":  # the classifier's evidence: galleries store each photo's classes
            classes = top_classes(channel.class_probabilities(features))
            nouns = NounClasses.load(Path(table) if table else None)
        if getattr(args, "tagger", None) != "none":
            tagger = WordTagger.load(
                # the checkpoint's own tagger: the served model's (a taught set's or the shipped)
                Path(args.tagger) if args.tagger else s.space_dir / VECTORS_FILE_NAME,
                vectors_identity(checkpoint_identity(checkpoint_path(args))),
            )
    _, hub = command_hubness(args)
    data = SplitData(ds, trees, photos, captions, columns, classes, nouns, tagger)
    if hub is not None:  # scored as /search and /describe score
        data.photo_penalty = hub.photo_penalties(photos)
        data.caption_penalty = hub.caption_penalties(captions)
    data.fusion = command_fusion(args)[1]
    if getattr(args, "objects", False) and ds.features is None:  # the fusion's channel
        data.objects, data.kinds = split_objects(ds, s)
    return model, data, parse


def split_objects(ds: Any, settings: Any) -> tuple[Any, Any]:
    """The photos' object detector scores (photos × 80, cached like features) and the
    noun → kinds table the service reads (``model_dir``'s); (None, None), logged, when the
    detector is not installed."""
    from groundsearch.model.runtime.objects.detector import installed_detector
    from groundsearch.model.runtime.objects.nouns import FILE_NAME, NounObjects

    detector = installed_detector(settings)
    if detector is None:
        return None, None
    kinds = NounObjects.load(settings.model_dir / FILE_NAME)
    return detector.score_files(ds.image_paths(), progress=True), kinds


def command_hubness(args: argparse.Namespace) -> tuple[Path | None, Hubness | None]:
    """``--hubness`` and the correction it names (``_named_file``: as the service serves it)."""
    from groundsearch.model.runtime.hubness import FILE_NAME, HubnessError, load_hubness

    return _named_file(args, "hubness", FILE_NAME, load_hubness, HubnessError)


def command_fusion(args: argparse.Namespace) -> tuple[Path | None, Fusion | None]:
    """``--fusion`` and the fusion it names (``_named_file``: as the service serves it)."""
    from groundsearch.model.runtime.fusion import FILE_NAME, FusionError, load_fusion

    return _named_file(args, "fusion", FILE_NAME, load_fusion, FusionError)


def _named_file(
    args: argparse.Namespace,
    option: str,
    name: str,
    load: Callable[[Path, dict[str, str]], T],
    error: type[Exception],
) -> tuple[Path | None, T | None]:
    """The file an option names and what ``load`` reads of it for the checkpoint: a path (``error``
    if it cannot be used for the checkpoint), none for 'none', else the served model's ``name``
    (``Settings.space_dir``, as the server reads it) when it was made for the checkpoint."""
    from groundsearch.model.runtime.checkpoints import checkpoint_identity

    named = getattr(args, option, None)
    if named == "none":
        return None, None
    path = Path(named) if named else get_settings().space_dir / name
    try:
        return path, load(path, checkpoint_identity(checkpoint_path(args)))
    except error:
        if named:
            raise
        return None, None


def cmd_fit_fusion(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.runtime.fusion import FILE_NAME
    from groundsearch.model.runtime.hubness import HUBNESS_KEY, file_digest
    from groundsearch.model.training.fusion import choose, prepare

    out = Path(args.out) if args.out else get_settings().model_dir / FILE_NAME
    args.fusion = "none"  # chosen on the joint scores
    with user_errors(*_errors()):
        collections = []
        for source in sources_of(args):
            model, data, parse = embedded_split(args, args.split, source)
            collections.append(prepare(str(source), data, model.embed_sentences, parse))
        identity = checkpoint_identity(checkpoint_path(args))
        fusion, report = choose(collections, identity)
        info = {
            "command": "groundsearch fit-fusion",
            "checkpoint": checkpoint_path(args).name,
            "split": args.split,
            "sources": [str(source) for source in sources_of(args)],
            "rule": "per query length (content words): the weights with the best mean "
            "short-query AP over the sources, unless the dev captions of that length lose "
            "text -> image R@1+5+10 beyond noise (model.training.fusion)",
            HUBNESS_KEY: file_digest(command_hubness(args)[0]),
        }
        fusion = replace(fusion, info=info)
        fusion.save(out)
    print(json_text({"out": str(out), **fusion.to_dict(), **report}, digits=4))
    return 0


def _errors() -> tuple[type[BaseException], ...]:
    from groundsearch.model.data import DatasetError
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.fusion import FusionError
    from groundsearch.model.runtime.hubness import HubnessError
    from groundsearch.model.runtime.images.photos import PhotoError
    from groundsearch.model.runtime.relevance import RelevanceError
    from groundsearch.model.runtime.sentences import UnusableText
    from groundsearch.model.runtime.tagger import TaggerError

    errors = (DatasetError, CheckpointError, UnusableText, PhotoError, RelevanceError)
    return (*errors, TaggerError, HubnessError, FusionError)


def cmd_fit_relevance(args: argparse.Namespace) -> int:
    import numpy as np

    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.runtime.hubness import HUBNESS_KEY, file_digest
    from groundsearch.model.runtime.relevance import RelevanceModel
    from groundsearch.model.training.relevance import (
        CONCEPT_SHARE,
        KEEP,
        KEEP_CAPTIONS,
        caption_figures,
        caption_relevance,
        choose_threshold,
        everyday_runs,
        fit,
        fit_evidence,
        fit_small,
        idle_rules,
        no_match_figures,
    )

    out = Path(args.out) if args.out else get_settings().model_dir / "relevance.json"
    with user_errors(*_errors()):
        model, datas, parse, (pools, runs, checks) = gathered_splits(args)
        kinds = fit(pools)
        small = fit_small(pools)
        evidence, evidence_small = fit_evidence(pools) if args.evidence else ({}, {})
        info = {
            "command": "groundsearch fit-relevance",
            "checkpoint": checkpoint_path(args).name,
            "split": args.split,
            "sources": [str(source) for source in sources_of(args)],
            "queries": {k: p.queries for k, p in pools.items()},
            "concept_share": CONCEPT_SHARE,
            "concept_labels": "a caption uses one of the concept's forms"
            + ("" if args.forms_only else " or kinds (model.data.held_out_concepts.HYPONYMS)"),
            "labels": "captions <-> photos: its own photo, or a photo whose consensus nouns "
            "hold the caption's subject main noun and at least half of its main nouns (its "
            "nouns among its own photo's consensus nouns)",
            "threshold_rule": f"highest keeping {KEEP:.0%} of relevant top-5 hits of "
            f"single-concept queries and, of caption queries with their own photo in the "
            f"top 5, keeping it for {KEEP_CAPTIONS:.0%}, on {args.split} (full models; "
            "the score-only ones share it; a rule with no relevant top-5 hit is skipped)",
            "small": "score-only models (the same hits and weights), for queries with fewer "
            "than top scores",
            # the service serves a hubness correction only with the relevance fitted on it
            HUBNESS_KEY: file_digest(command_hubness(args)[0]),
            "fusion": str(command_fusion(args)[0]),
        }
        if evidence:
            info["evidence"] = (
                "text -> image queries with a noun the classifier names (noun_classes.tsv) "
                "or the vector tagger tags (vector_tagger.npz): the same fit on their hits "
                "alone, reading log(0.01 + the hit photo's evidence: the larger of its top-10 "
                "classes' probability on the query nouns' classes (max over nouns) and the "
                "tagger's probability of the query's tagged nouns (min over nouns)); "
                "evidence_threshold by the same rule, judging with evidence, and keeping "
                f"{KEEP:.0%} of the relevant top-5 hits of the everyday words present "
                f"on {args.split} (model.training.evaluation.everyday); "
                f"nouns: {args.nouns or 'noun_classes.tsv'}"
            )
            info["evidence_queries"] = {
                k: len(np.unique(p.arrays(named=True)[2])) for k, p in pools.items()
            }
        identity = checkpoint_identity(checkpoint_path(args))
        fitted = RelevanceModel(kinds, 0.5, identity, info=info)
        threshold = choose_threshold(runs, fitted, checks)
        evidence_threshold = short_threshold = None
        everyday: list[Any] = []
        if evidence:
            everyday = [r for d in datas for r in everyday_runs(d, model.embed_sentences, parse)]
            with_evidence = RelevanceModel(kinds, 0.5, identity, evidence=evidence)
            evidence_threshold = choose_threshold(runs, with_evidence, checks, everyday=everyday)
            if args.short:  # the concept rule alone, for queries of at most 3 words
                short_threshold = choose_threshold(runs, with_evidence)
        fitted = RelevanceModel(
            kinds,
            threshold,
            identity,
            info=info,
            small=small,
            evidence=evidence,
            evidence_small=evidence_small,
            evidence_threshold=evidence_threshold,
            short_threshold=short_threshold,
        )
        fitted.save(out)
        score_only = fitted.score_only()
        plain = fitted.without_evidence()

    def captions(judge: RelevanceModel, at: float) -> dict[str, Any]:
        return caption_figures(checks, caption_relevance(checks, judge), at)

    split = args.split
    summary: dict[str, Any] = {
        "out": str(out),
        "threshold": threshold,
        "threshold_rules_skipped": idle_rules(runs, checks, everyday),
        "queries": info["queries"],
        f"{split}_no_match": no_match_figures(runs, plain, threshold),
        f"{split}_caption_queries": captions(plain, threshold),
        f"{split}_score_only_no_match": no_match_figures(runs, score_only, threshold),
        f"{split}_score_only_caption_queries": captions(score_only, threshold),
    }
    if evidence_threshold is not None:
        summary["evidence_threshold"] = evidence_threshold
        summary["evidence_queries"] = info["evidence_queries"]
        summary[f"{split}_everyday_words"] = no_match_figures(everyday, fitted, evidence_threshold)
        summary[f"{split}_evidence_caption_queries"] = captions(fitted, evidence_threshold)
    if short_threshold is not None:
        summary["short_threshold"] = short_threshold
        summary[f"{args.split}_evidence_no_match"] = no_match_figures(runs, fitted, short_threshold)
    print(json_text(summary, digits=3))
    return 0


def cmd_evaluate_relevance(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.runtime.relevance import SHORT_WORDS, load_relevance
    from groundsearch.model.training.relevance import measure, reliability_figure

    path = Path(args.relevance) if args.relevance else get_settings().space_dir / "relevance.json"
    with user_errors(*_errors()):
        relevance = load_relevance(path, checkpoint_identity(checkpoint_path(args)))
        _, _, _, (pools, runs, checks) = gathered_splits(args)
        plain = relevance.without_evidence()
        result: dict[str, Any] = {
            "relevance": str(path),
            "checkpoint": str(checkpoint_path(args)),
            "split": args.split,
            "sources": [str(source) for source in sources_of(args)],
            **measure(pools, runs, plain, checks),
        }
        if relevance.evidence and args.evidence:
            # as the service judges once it passes each hit's evidence (queries with a
            # nameable noun), at the threshold chosen for that
            threshold = relevance.default_threshold(evidence=True)
            with_evidence = replace(relevance, threshold=threshold)
            short = relevance.default_threshold(evidence=True, words=SHORT_WORDS)
            result["evidence"] = measure(pools, runs, with_evidence, checks, short)
        if relevance.small:
            # the score-only models (galleries of fewer than top photos), on the same hits
            score_only = measure(pools, runs, relevance.score_only(), checks)
            score_only["no_match"].pop("per_query", None)
            result["score_only"] = score_only
        if args.figure:
            reliability_figure(result, Path(args.figure))
    text = json_text(result, digits=4)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(
        sub,
        "fit-relevance",
        cmd_fit_relevance,
        "fit the calibrated relevance model on the dev splits of --source (default: "
        "Flickr8k's; captions, photos, concept queries, arithmetic) and write it as JSON",
    )
    checkpoint_argument(p, "the joint-model checkpoint whose scores are calibrated")
    # Flickr8k dev by default: fitted on both dev sets, the two collections' different
    # labels left it calibrated on neither (docs/RESULTS.md, "The relevance")
    data_option(p, many=True)
    p.add_argument("--split", default="dev", choices=("dev", "train"), help="never test")
    p.add_argument("--out", help="where to write it (default: the artifacts' relevance.json)")
    p.add_argument(
        "--short",
        action="store_true",
        help="also a default threshold for short queries judged with evidence (at most 3 "
        "words), by the concept rule alone (not shipped: docs/RESULTS.md)",
    )
    _evidence_options(p)

    p = command(
        sub,
        "fit-fusion",
        cmd_fit_fusion,
        "choose how short queries' scores are fused with the photos' evidence (the "
        "classifier's classes and the tagger's words) on the dev splits of --source "
        "(default: Flickr8k's and cc-web's) and write it as JSON",
    )
    checkpoint_argument(p, "the joint-model checkpoint whose scores are fused")
    data_option(p, many=True, default="flickr8k,cc-web")
    p.add_argument("--split", default="dev", choices=("dev", "train"), help="never test")
    p.add_argument("--out", help="where to write it (default: the artifacts' fusion.json)")
    _evidence_options(p)
    p.add_argument(
        "--objects",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the object detector's evidence too, where the split is photo files and the "
        "detector is installed (groundsearch fetch-objects), as a gallery stores it",
    )

    p = command(
        sub,
        "evaluate-relevance",
        cmd_evaluate_relevance,
        "the relevance model's calibration error, AUROC on concept queries and 'no match' "
        "shares on a split",
    )
    checkpoint_argument(p, "the joint-model checkpoint the relevance model was fitted for")
    data_option(p, many=True)
    p.add_argument("--split", default="test", help="the split measured")
    p.add_argument("--relevance", help="the relevance model (default: the shipped one)")
    p.add_argument("--out", help="also write the JSON here")
    p.add_argument("--figure", help="write the reliability diagram (PNG) here")
    _evidence_options(p)


def _concepts(args: argparse.Namespace) -> dict[str, tuple[str, ...]]:
    """The concept queries' words: forms and kinds, or with ``--forms-only`` forms alone."""
    from groundsearch.model.training.relevance import CONCEPTS, FORMS_ONLY

    return FORMS_ONLY if getattr(args, "forms_only", False) else CONCEPTS


def nouns_table(text: str) -> str:
    """``--nouns``: 'none', or a noun -> classes table file that is there."""
    if text != "none" and not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no noun -> classes table at {text!r} (or 'none')")
    return text


def _evidence_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--forms-only",
        action="store_true",
        help="count a photo as showing a concept only when a caption uses one of its forms "
        "(model.data.held_out_concepts.HELD_OUT), not its kinds (HYPONYMS: 'jeep' for 'car'): the "
        "labels of the figures before HYPONYMS",
    )
    p.add_argument(
        "--evidence",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also fit / measure the evidence models (the classifier's probability of the "
        "query nouns' classes on each hit photo)",
    )
    p.add_argument(
        "--nouns",
        type=nouns_table,
        help="the noun -> classes table of the classifier's evidence (default: the "
        "artifacts' noun_classes.tsv, as the service reads it with each photo's stored "
        "classes; 'none': the tagger's evidence alone, as for a gallery without classes)",
    )
    p.add_argument(
        "--hubness",
        help="the hubness correction of the scores (default: the artifacts' hubness.npz "
        "when it was chosen for the checkpoint, as served; 'none': raw scores)",
    )
    p.add_argument(
        "--fusion",
        help="the short queries' fusion with their evidence (default: the artifacts' "
        "fusion.json when it was chosen for the checkpoint, as served; 'none': the joint "
        "scores alone)",
    )
    p.add_argument(
        "--tagger",
        help="the word tagger whose probability of the query's nouns is evidence too "
        "(default: the artifacts' word_tagger.npz; 'none': the classifier's alone)",
    )
