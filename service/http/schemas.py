"""Request and response bodies (the OpenAPI document is made from these)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from groundsearch.index.gallery import ImageRecord
from groundsearch.index.hits import Hit
from groundsearch.index.ranking.pages import Order, Page
from groundsearch.model.runtime.captioning import Generated
from groundsearch.model.runtime.captioning.novel import Seen
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.service.core.capabilities.describe import Described, Description
from groundsearch.service.core.relevance import split

#: What a hit's ``relevance`` is (docs/API.md, "Relevance").
RELEVANCE = (
    "The calibrated probability (0..1) that this hit matches the query, fitted on "
    "Flickr8k dev; null when the server has no relevance model for its checkpoint."
)


class Place(BaseModel):
    """Where a photo was taken, from its EXIF GPS block."""

    lat: float = Field(ge=-90, le=90, description="Latitude, WGS84 degrees (south negative).")
    lon: float = Field(ge=-180, le=180, description="Longitude, WGS84 degrees (west negative).")


TAKEN = (
    "When the photo was taken, ISO 8601 as its file says it: EXIF DateTimeOriginal with "
    "its offset ('2024-07-01T18:03:05+02:00'; no offset when the file gives none), or the "
    "file's modification time in UTC ('+00:00') when the file has no EXIF date "
    "(taken_source 'file'); null when unknown (an upload without an EXIF date, or a photo "
    "of a migrated gallery not read yet)."
)
TAKEN_SOURCE = (
    "Where `taken` comes from: 'exif' (the photo's EXIF date) or 'file' (the file's "
    "modification time); null when `taken` is null."
)


Url = Annotated[str, Field(description="Where the photo itself is served.")]
FileName = Annotated[str, Field(description="The photo's file name.")]
Source = Annotated[
    Literal["upload", "folder"],
    Field(description="'upload': added through the API; 'folder': indexed where it lies."),
]
Taken = Annotated[str | None, Field(description=TAKEN)]
TakenSource = Annotated[Literal["exif", "file"] | None, Field(description=TAKEN_SOURCE)]
Camera = Annotated[
    str | None,
    Field(
        description="The camera, EXIF Make and Model ('Apple iPhone 12'); null if the "
        "file names none."
    ),
]
PlaceField = Annotated[
    Place | None, Field(description="Where it was taken (EXIF GPS); null without GPS.")
]
Width = Annotated[
    int | None, Field(description="Width in pixels as shown (after the EXIF orientation).")
]
Height = Annotated[
    int | None, Field(description="Height in pixels as shown (after the EXIF orientation).")
]
FolderField = Annotated[
    str | None,
    Field(description="The absolute folder of an indexed photo's file; null for an upload."),
]


def photo_fields(record: ImageRecord) -> dict[str, Any]:
    """What every answer says of a gallery photo."""
    meta = record.meta
    place = None if meta.place is None else Place(lat=meta.place[0], lon=meta.place[1])
    return {
        "id": record.id,
        "url": f"/images/{record.id}",
        "file": record.file,
        "captions": list(record.captions),
        "source": "upload" if record.uploaded else "folder",
        "taken": meta.taken,
        "taken_source": meta.taken_source if meta.taken_source in ("exif", "file") else None,
        "camera": meta.camera,
        "place": place,
        "width": meta.width,
        "height": meta.height,
        "folder": None if record.uploaded else meta.folder,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


class ImageHit(BaseModel):
    """A gallery photo with its score, relevance, captions and what its file says."""

    id: int
    score: float
    relevance: float | None = Field(description=RELEVANCE)
    url: Url
    file: FileName
    captions: list[str]
    source: Source
    taken: Taken
    taken_source: TakenSource
    camera: Camera
    place: PlaceField
    width: Width
    height: Height
    folder: FolderField

    @classmethod
    def of(cls, hit: Hit[ImageRecord]) -> ImageHit:
        return cls(
            score=round(hit.score, 6), relevance=_round(hit.relevance), **photo_fields(hit.record)
        )


class GalleryPhoto(BaseModel):
    """A gallery photo (no query: no score), its captions and what its file says."""

    id: int
    url: Url
    thumbnail: str = Field(
        description="Where a small JPEG of it is served (GET /images/{id}/thumbnail; pass "
        "'size' for another than 256 pixels)."
    )
    file: FileName
    captions: list[str]
    source: Source
    taken: Taken
    taken_source: TakenSource
    camera: Camera
    place: PlaceField
    width: Width
    height: Height
    folder: FolderField

    @classmethod
    def of(cls, record: ImageRecord) -> GalleryPhoto:
        return cls(thumbnail=f"/images/{record.id}/thumbnail", **photo_fields(record))


class CaptionHit(BaseModel):
    """A caption with its score: a gallery caption (with the photo it describes) or one
    from the caption bank (no photo)."""

    id: int | None = Field(description="The gallery caption's id; null for the bank's.")
    score: float
    relevance: float | None = Field(description=RELEVANCE)
    text: str
    source: Literal["gallery", "bank"]
    image_id: int | None
    image_url: str | None

    @classmethod
    def of(cls, hit: Description) -> CaptionHit:
        url = f"/images/{hit.image_id}" if hit.image_id is not None else None
        return cls(
            id=hit.id,
            score=round(hit.score, 6),
            relevance=_round(hit.relevance),
            text=hit.text,
            source="gallery" if hit.source == "gallery" else "bank",
            image_id=hit.image_id,
            image_url=url,
        )


class WrittenSentence(BaseModel):
    """A new sentence the caption decoder wrote for a point of the joint space."""

    text: str
    score: float = Field(
        description="Length-normalised log-probability under the decoder (higher is "
        "better), or the joint model's score when the server re-ranks its beam."
    )

    @classmethod
    def of(cls, sentence: Generated) -> WrittenSentence:
        return cls(text=sentence.text, score=round(sentence.score, 6))


WRITTEN = "Sentences the caption decoder wrote (the top of its beam, best first)."
RESULTS = "The hits whose relevance reaches min_relevance, best first."
WEAK = (
    "The hits below min_relevance, best first, kept apart (results then weak are the "
    "k hits, with their scores)."
)
NO_MATCH = "True when no hit reaches min_relevance: nothing in the gallery is a good match."
MIN_RELEVANCE = (
    "The min_relevance applied (the one asked for, or the server's default); null without "
    "a relevance model."
)


def image_hits(hits: Sequence[Hit[ImageRecord]], threshold: float | None) -> dict[str, Any]:
    """``results``, ``weak``, ``no_match`` and ``min_relevance`` of an answer's photos."""
    made = [ImageHit.of(h) for h in hits]
    strong, weak = split(made, [h.relevance for h in hits], threshold)
    return {"results": strong, "weak": weak, "no_match": not strong, "min_relevance": threshold}


def caption_hits(
    hits: Sequence[Description], threshold: float | None, retrieved: bool = True
) -> dict[str, Any]:
    """``results``, ``weak``, ``no_match`` and ``min_relevance`` of found captions."""
    made = [CaptionHit.of(h) for h in hits]
    strong, weak = split(made, [h.relevance for h in hits], threshold)
    no_match = retrieved and not strong
    return {"results": strong, "weak": weak, "no_match": no_match, "min_relevance": threshold}


def page_hits(page: Page, threshold: float | None) -> dict[str, Any]:
    """``image_hits`` and the paging fields of a page (``no_match``: ``total`` 0)."""
    out = image_hits(page.hits, threshold)
    out.update(no_match=page.total == 0, next=page.next, total=page.total)
    out["total_exact"] = page.total_exact
    return out


NEXT = "The cursor of the next page (pass it as 'cursor'); null on the last page."
TOTAL = (
    "How many photos passing the filters reach min_relevance, counted over the ranking's "
    "first 1,000 hits (a lower bound when total_exact is false)."
)


class SearchResponse(BaseModel):
    query: str
    results: list[ImageHit] = Field(description=RESULTS)
    weak: list[ImageHit] = Field(default_factory=list, description=WEAK)
    no_match: bool = Field(default=False, description=NO_MATCH)
    min_relevance: float | None = Field(default=None, description=MIN_RELEVANCE)
    order: Order = Field(
        default="relevance", description="The order of the hits (see the 'order' parameter)."
    )
    next: str | None = Field(default=None, description=NEXT)
    total: int | None = Field(default=None, description=TOTAL)
    total_exact: bool | None = Field(default=None, description="Whether 'total' is exact.")
    timings_ms: dict[str, float]


class ImagesResponse(BaseModel):
    results: list[ImageHit] = Field(description=RESULTS)
    weak: list[ImageHit] = Field(default_factory=list, description=WEAK)
    no_match: bool = Field(default=False, description=NO_MATCH)
    min_relevance: float | None = Field(default=None, description=MIN_RELEVANCE)
    order: Order | None = Field(
        default=None, description="The order of the hits, on the routes that take one."
    )
    next: str | None = Field(default=None, description=NEXT + " (paged routes only)")
    total: int | None = Field(default=None, description=TOTAL + " (paged routes only)")
    total_exact: bool | None = Field(default=None, description="Whether 'total' is exact.")
    generated: list[WrittenSentence] = Field(
        default_factory=list, description=WRITTEN + " Only when asked for (`sentence=true`)."
    )
    timings_ms: dict[str, float] = Field(default_factory=dict)


class LibraryResponse(BaseModel):
    results: list[GalleryPhoto] = Field(
        description="The page's photos in the order asked for (photos without a date last)."
    )
    order: Literal["-date", "date"] = Field(
        description="'-date': newest first; 'date': oldest first."
    )
    next: str | None = Field(default=None, description=NEXT)
    total: int = Field(description="How many photos pass the filters (exact).")


class Concept(BaseModel):
    """A class the backbone's ImageNet classifier saw in the photo."""

    word: str | None = Field(
        description="The everyday word for the class (the entry-level noun: 'dog' for "
        "every breed, 'laptop' for 'notebook'); null for a class never named."
    )
    imagenet_class: str = Field(description="The classifier's own class name.")
    probability: float = Field(description="The class's probability.")
    word_probability: float = Field(
        description="The word's probability: the sum over the classes it names (0 when "
        "the class is never named). A photo's written sentence names one of its words: from "
        "0.15 a word the decoder never learned, from 0.8 one it did (docs/API.md)."
    )

    @classmethod
    def of(cls, seen: Seen) -> Concept:
        return cls(
            word=seen.word or None,
            imagenet_class=seen.imagenet_class,
            probability=round(seen.probability, 4),
            word_probability=round(seen.word_probability, 4),
        )


class DescribeResponse(BaseModel):
    generated: list[WrittenSentence] = Field(description=WRITTEN)
    results: list[CaptionHit] = Field(
        description="Existing captions whose relevance reaches min_relevance, best first."
    )
    concepts: list[Concept] = Field(
        default_factory=list,
        description="What the backbone's ImageNet classifier saw (on the same CNN pass): "
        "its top classes at probability 0.05 or more, best first, at most five.",
    )
    timings_ms: dict[str, float]
    weak: list[CaptionHit] = Field(default_factory=list, description=WEAK)
    no_match: bool = Field(default=False, description=NO_MATCH)
    min_relevance: float | None = Field(default=None, description=MIN_RELEVANCE)

    @classmethod
    def of(cls, found: Described, threshold: float | None, retrieved: bool) -> DescribeResponse:
        """The answer of ``Describe.run``'s finds (``retrieved``: captions were asked for)."""
        hits, wrote, seen, timings = found
        return cls(
            generated=[WrittenSentence.of(g) for g in wrote],
            concepts=[Concept.of(c) for c in seen],
            **caption_hits(hits, threshold, retrieved),
            timings_ms=timings,
        )


class ParaphraseResponse(BaseModel):
    query: str
    generated: list[WrittenSentence] = Field(description=WRITTEN)
    timings_ms: dict[str, float]


class TreeNode(BaseModel):
    index: int = Field(description="1-based position of the word.")
    word: str
    upos: str
    deprel: str = Field(description="The collapsed relation that picks the SDT-RNN's matrix.")
    head: int = Field(description="Index of the parent; 0 for the root.")
    size: int = Field(description="ℓ: the number of words under this node (Eq. 4).")
    share: float | None = Field(description="Share of the sentence vector (sums to 1).")


class ExplainResponse(BaseModel):
    text: str
    encoder: str
    root: int
    nodes: list[TreeNode]
    timings_ms: dict[str, float]

    @classmethod
    def of(
        cls,
        tree: DependencyTree,
        shares: list[float] | None,
        encoder: str,
        timings: dict[str, float],
    ) -> ExplainResponse:
        nodes = [
            TreeNode(
                index=n.index,
                word=n.text,
                upos=n.upos,
                deprel=n.collapsed,
                head=n.head,
                size=n.size,
                share=None if shares is None else _round(shares[i]),
            )
            for i, n in enumerate(tree.nodes)
        ]
        return cls(
            text=tree.text, encoder=encoder, root=tree.root.index, nodes=nodes, timings_ms=timings
        )


class AddedPhoto(BaseModel):
    id: int
    url: str
    captions: list[int] = Field(description="Ids of the captions added with the photo.")
    new: bool = Field(
        description="False when the same photo was already in the gallery (stored once; "
        "the new captions were added to it)."
    )


class RemovedPhoto(BaseModel):
    id: int
    removed_captions: int


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    ready: bool
    model: str = Field(
        default="shipped",
        description="The model served: 'shipped', 'taught: NAME' (installed by `groundsearch "
        "teach`), or the checkpoint named by GROUNDSEARCH_CHECKPOINT / --checkpoint.",
    )
    encoder: str
    checkpoint: str = Field(description="SHA-256 of the served checkpoint.")
    images: int
    captions: int
    caption_bank: str = Field(description="The caption bank /describe draws from, or its state.")
    indexes: dict[str, str] = Field(
        default_factory=dict,
        description="Each search index's kind now, e.g. 'IndexFlatIP + 0 exact' or "
        "'IVF4096,PQ64,Refine(SQfp16) + 120 exact' (a compressed main beside exact "
        "recent additions).",
    )
    read_only: bool = Field(default=False, description="Whether this server is a replica.")
    decoder: str = Field(
        default="none", description="The caption decoder that writes sentences, or why none."
    )
    concepts: float = Field(
        default=0.0,
        description="Weight of the open-vocabulary channel (ImageNet classes named in GloVe) "
        "beside the joint score; 0 when the checkpoint has none.",
    )
    relevance: str = Field(
        default="none",
        description="The relevance model that gives each hit its 'relevance' (with the "
        "default min_relevance), or why none.",
    )
    hubness: str = Field(
        default="none",
        description="The hubness correction /search ranks a text query's photos by (score "
        "less each photo's penalty), or why none.",
    )
    fusion: str = Field(
        default="none",
        description="How /search ranks a query of a word or two (its score fused with what "
        "each photo shows: the classifier's classes and the tagger's words), or why not.",
    )
