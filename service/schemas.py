"""Request and response bodies (the OpenAPI document is made from these)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from pydantic import BaseModel, Field

from groundsearch.index.gallery import CaptionRecord, ImageRecord
from groundsearch.model.runtime.parsing.tree import DependencyTree


class ImageHit(BaseModel):
    """A gallery photo with its score and captions."""

    id: int
    score: float
    url: str = Field(description="Where the photo itself is served.")
    file: str
    captions: list[str]
    source: str = Field(description="Where the photo came from: a dataset's name or 'upload'.")

    @classmethod
    def of(cls, hit: tuple[ImageRecord, float]) -> ImageHit:
        record, score = hit
        source = record.source if record.uploaded else Path(record.source).name
        fields = {**asdict(record), "source": source, "url": f"/images/{record.id}"}
        return cls(**fields, score=round(score, 6))


class CaptionHit(BaseModel):
    """A gallery caption with its score and the photo it describes."""

    id: int
    score: float
    text: str
    image_id: int
    image_url: str

    @classmethod
    def of(cls, hit: tuple[CaptionRecord, float]) -> CaptionHit:
        record, score = hit
        url = f"/images/{record.image_id}"
        return cls(**asdict(record), image_url=url, score=round(score, 6))


class SearchResponse(BaseModel):
    query: str
    results: list[ImageHit]
    timings_ms: dict[str, float]


class ImagesResponse(BaseModel):
    results: list[ImageHit]
    timings_ms: dict[str, float] = Field(default_factory=dict)


class DescribeResponse(BaseModel):
    results: list[CaptionHit]
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
                share=None if shares is None else round(shares[i], 6),
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


class RemovedPhoto(BaseModel):
    id: int
    removed_captions: int


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    ready: bool
    encoder: str
    checkpoint: str = Field(description="SHA-256 of the served checkpoint.")
    images: int
    captions: int
