"""The evaluation protocol (GUIDE §3): retrieval both ways, sentence similarity, Flickr8k
expert judgments and STS-B / SICK-R (correlations × 100); a benchmark whose files are
absent gives ``{"skipped": reason}``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from groundsearch.model.data.flickr import EXPERT_FILE, IMAGES_DIR, DatasetError, read_caption_ids
from groundsearch.model.runtime.hubness import Hubness
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.training.evaluation.retrieval import (
    bootstrap_intervals,
    retrieval_metrics,
    t2i_by_group,
)
from groundsearch.model.training.evaluation.similarity import (
    cosine_pairs,
    pearson,
    read_expert,
    read_sick,
    read_sts,
    same_image_mean_rank,
    spearman,
)

#: Texts → trees, in order (the text front door over the parse cache: ``corpus.text_trees``).
ParseFn = Callable[[list[str]], list[DependencyTree]]
#: Image files → backbone features, in order (a FeatureExtractor's ``embed_files``).
ImageFn = Callable[[list[Path]], np.ndarray]

STS_TEST = Path("stsbenchmark") / "sts-test.csv"
SICK_FILE = Path("sick") / "SICK.txt"


class Embedder(Protocol):
    """A model as evaluation sees it: captions and image features into one space."""

    parser: str
    backbone: str

    def embed_sentences(self, trees: Sequence[DependencyTree]) -> np.ndarray: ...

    def embed_images(self, features: np.ndarray) -> np.ndarray: ...


def skipped(reason: str) -> dict[str, Any]:
    return {"skipped": reason}


def has_verb(tree: DependencyTree) -> bool:
    """Whether the parse has a word tagged VERB (copulas are AUX)."""
    return any(node.upos == "VERB" for node in tree)


def caption_groups(trees: Sequence[DependencyTree]) -> dict[str, np.ndarray]:
    """Masks over the captions for the error analysis: with and without a verb."""
    verb = np.array([has_verb(t) for t in trees], dtype=bool)
    return {"with_verb": verb, "without_verb": ~verb}


def split_metrics(
    model: Embedder,
    trees: Sequence[DependencyTree],
    features: np.ndarray,
    caption_image: np.ndarray,
    resamples: int = 1000,
    hubness: Hubness | None = None,
) -> dict[str, Any]:
    """One split's retrieval metrics, image search by caption group and sentence-similarity
    mean rank; with ``hubness``, ranked as ``/search`` and ``/describe`` rank."""
    y = model.embed_sentences(trees)
    v = model.embed_images(features)
    scores = v @ y.T
    search, describe = scores, scores
    if hubness is not None:
        search = scores - hubness.photo_penalties(v)[:, None]
        describe = scores - hubness.caption_penalties(y)[None, :]
    out = retrieval_metrics(describe, caption_image, search)
    out["ci95"] = bootstrap_intervals(describe, caption_image, resamples=resamples, search=search)
    out["t2i_groups"] = t2i_by_group(search, caption_image, caption_groups(trees))
    try:
        out["sentence_similarity_mean_rank"] = same_image_mean_rank(y, caption_image)
    except ValueError as exc:  # an image with a single caption
        out["sentence_similarity_mean_rank"] = skipped(str(exc))
    return out


def pair_correlation(
    model: Embedder, parse: ParseFn, a: Sequence[str], b: Sequence[str], gold: np.ndarray
) -> dict[str, Any]:
    """Pearson and Spearman (× 100) of the cosine of sentence pairs with gold scores."""
    if len(a) != len(b) or len(a) != len(gold) or len(a) < 2:
        raise ValueError(f"need 2+ scored sentence pairs, got {len(a)}/{len(b)}/{len(gold)}")
    y = model.embed_sentences(parse([*a, *b]))
    cos = cosine_pairs(y[: len(a)], y[len(a) :])
    return dict(pearson=100 * pearson(cos, gold), spearman=100 * spearman(cos, gold), pairs=len(a))


def sentence_benchmarks(
    model: Embedder, parse: ParseFn, data_dir: Path
) -> dict[str, dict[str, Any]]:
    """STS-B test and SICK-R test correlations, each skipped when its file is absent."""
    out: dict[str, dict[str, Any]] = {}
    for name, file, read in (("sts_b", STS_TEST, read_sts), ("sick_r", SICK_FILE, read_sick)):
        path = Path(data_dir) / file
        found = path.is_file()
        out[name] = (
            pair_correlation(model, parse, *read(path)) if found else skipped(f"{path} not found")
        )
    return out


def expert_correlation(
    model: Embedder, root: Path, parse: ParseFn, embed_files: ImageFn
) -> dict[str, Any]:
    """Spearman (× 100) of image–caption cosine with the mean expert score, over the
    usable judgments of ``root/ExpertAnnotations.txt``."""
    root = Path(root)
    path = root / EXPERT_FILE
    if not path.is_file():
        return skipped(f"no {EXPERT_FILE} in {root}")
    judgments = read_expert(path)
    if not judgments:
        raise DatasetError(f"{path} holds no judgments")
    captions = read_caption_ids(root)
    usable = [
        (image, captions[cid], score)
        for image, cid, score in judgments
        if cid in captions and (root / IMAGES_DIR / image).is_file()
    ]
    if len(usable) < 2:
        return skipped(
            f"{len(usable)} of the {len(judgments)} judgments in {path} have their photo "
            f"in {root / IMAGES_DIR} and their caption in the captions file; 2 are needed"
        )
    images = sorted({image for image, _, _ in usable})
    row = {image: i for i, image in enumerate(images)}
    v = model.embed_images(embed_files([root / IMAGES_DIR / image for image in images]))
    y = model.embed_sentences(parse([text for _, text, _ in usable]))
    cos = cosine_pairs(v[[row[image] for image, _, _ in usable]], y)
    return {
        "spearman": 100 * spearman(cos, np.array([score for _, _, score in usable])),
        "pairs": len(usable),
        "pairs_skipped": len(judgments) - len(usable),
    }
