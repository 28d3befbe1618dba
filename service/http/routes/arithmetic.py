"""Embedding arithmetic (Kiros et al. 2014): photos near ``photo − Σ minus + Σ plus``, from
a gallery photo or an uploaded one."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from groundsearch.index.filters.conditions import PhotoFilter
from groundsearch.index.gallery import ImageRecord
from groundsearch.index.hits import Hit
from groundsearch.model.runtime.captioning import Generated
from groundsearch.service.core.capabilities.arithmetic import Arithmetic
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.core.timing import Timings
from groundsearch.service.http.admission import declare_work
from groundsearch.service.http.deps import (
    AdmissionDep,
    ArithmeticDep,
    PhotoWorkersDep,
    SettingsDep,
    TextWorkersDep,
    check_k,
    read_upload,
)
from groundsearch.service.http.problems import responses
from groundsearch.service.http.routes.filters import Filters
from groundsearch.service.http.routes.params import (
    MAX_ID,
    PHOTO_STATUSES,
    WRITING_ERRORS,
    K,
    MinRelevance,
    Minus,
    Photo,
    Plus,
    Rerank,
)
from groundsearch.service.http.schemas import ImagesResponse, WrittenSentence, image_hits
from groundsearch.service.http.uploads import read_photo

router = APIRouter(tags=["search"])
Sentence = Annotated[
    bool, Query(description="Also write a sentence for the result vector (caption decoder).")
]


@dataclass(frozen=True)
class Terms:
    """What both routes read besides the photo: the phrases to add and to take away, how
    many results, whether to rerank and whether to write a sentence."""

    plus: list[str]
    minus: list[str]
    k: int
    rerank: bool
    sentence: bool
    min_relevance: float | None
    where: PhotoFilter

    def check(self, capability: Arithmetic, settings: ServiceSettings) -> None:
        """422 for a ``k`` over the limit; 501 before any work when no sentence can be
        written."""
        check_k(self.k, settings)
        if self.sentence:
            capability.captioner.require()


async def _terms(
    where: Filters,
    plus: Plus = [],  # noqa: B006
    minus: Minus = [],  # noqa: B006
    k: K = 10,
    rerank: Rerank = False,
    sentence: Sentence = False,
    min_relevance: MinRelevance = None,
) -> Terms:
    return Terms(plus, minus, k, rerank, sentence, min_relevance, where)


async def _gallery_photo(
    image_id: Annotated[
        int, Query(ge=1, le=MAX_ID, description="The gallery photo to start from.")
    ],
) -> int:
    return image_id


#: ``async``, as ``service.http.deps``'s are (no thread-pool hop). The gallery photo is one too,
#: so that FastAPI reads it, and reports it invalid, before the terms, as it is declared.
TermsDep = Annotated[Terms, Depends(_terms)]
GalleryPhoto = Annotated[int, Depends(_gallery_photo)]


@router.post(
    "/arithmetic",
    response_model=ImagesResponse,
    responses=WRITING_ERRORS,
    openapi_extra=declare_work(parse=("plus", "minus", "sentence")),
)
async def arithmetic(
    capability: ArithmeticDep,
    settings: SettingsDep,
    request: Request,
    admission: AdmissionDep,
    workers: TextWorkersDep,
    image_id: GalleryPhoto,
    terms: TermsDep,
) -> ImagesResponse:
    """Photos near ``photo − Σ minus + Σ plus`` (Kiros et al. 2014), from a gallery photo;
    with ``sentence``, what the result vector says in words."""
    terms.check(capability, settings)  # before any work
    plus, minus, sentence = terms.plus, terms.minus, terms.sentence
    async with admission.slots_for(request, plus=plus, minus=minus, sentence=sentence):
        compute = partial(capability.run, written=sentence, where=terms.where)
        hits, wrote, timings = await workers.run(
            compute, image_id, plus, minus, terms.k, terms.rerank
        )
    return _images(hits, capability.judge.threshold(terms.min_relevance), wrote, timings)


def _images(
    hits: list[Hit[ImageRecord]], threshold: float | None, wrote: list[Generated], timings: Timings
) -> ImagesResponse:
    return ImagesResponse(
        **image_hits(hits, threshold),
        generated=[WrittenSentence.of(g) for g in wrote],
        timings_ms=timings,
    )


@router.post(
    "/arithmetic/upload",
    response_model=ImagesResponse,
    responses=responses(404, *PHOTO_STATUSES),
    openapi_extra=declare_work(cnn=(), parse=("plus", "minus"), upload=True),
)
async def arithmetic_upload(
    capability: ArithmeticDep,
    settings: SettingsDep,
    request: Request,
    admission: AdmissionDep,
    workers: PhotoWorkersDep,
    image: Photo,
    terms: TermsDep,
) -> ImagesResponse:
    """Photos near ``photo − Σ minus + Σ plus`` (Kiros et al. 2014), from an uploaded photo;
    with ``sentence``, what the result vector says in words."""
    terms.check(capability, settings)
    data = await read_upload(image, settings)
    async with admission.slots_for(request, plus=terms.plus, minus=terms.minus):
        photo, _ = await workers.run(
            read_photo, data, settings.max_pixels, capability.photos.min_side
        )
        compute = partial(capability.run, written=terms.sentence, where=terms.where)
        hits, wrote, timings = await workers.run(
            compute, photo, terms.plus, terms.minus, terms.k, terms.rerank
        )
    return _images(hits, capability.judge.threshold(terms.min_relevance), wrote, timings)
