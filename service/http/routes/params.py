"""Parameters shared by the routes, with their limits (``openapi`` writes those that are
settings), and their error statuses."""

from __future__ import annotations

from typing import Annotated

from fastapi import File, Path, Query, UploadFile

from groundsearch.model.runtime.images.photos import format_names
from groundsearch.service.http.problems import responses

#: Photo ids are SQLite row ids.
MAX_ID = 2**63 - 1
#: Phrases ``/arithmetic`` adds (and, as many again, takes away).
MAX_PHRASES = 10

Text = Annotated[
    str,
    Query(
        description="A sentence or phrase in English, e.g. 'a dog runs on the beach'. A text "
        "with no word the model knows is refused (404, /problems/unusable-text)."
    ),
]
K = Annotated[int, Query(ge=1, description="How many results.")]
ImageId = Annotated[int, Path(ge=1, le=MAX_ID, description="A gallery photo's id.")]
Plus = Annotated[
    list[str], Query(max_length=MAX_PHRASES, description="Phrases to add, e.g. 'red'.")
]
Minus = Annotated[list[str], Query(max_length=MAX_PHRASES, description="Phrases to take away.")]
MinRelevance = Annotated[
    float | None,
    Query(
        ge=0.0,
        le=1.0,
        description="Hits whose relevance (a calibrated probability, 0..1) is below this are "
        "returned apart, in 'weak'; 'no_match' is true when none reaches it. Default: the "
        "server's (chosen on Flickr8k dev; /ready says it). 0 keeps every hit in 'results'.",
    ),
]
Rerank = Annotated[bool, Query(description="Re-sort by the mean of the top photos.")]
Beam = Annotated[
    int | None,
    Query(ge=1, le=10, description="Beam width for written sentences (default: the server's)."),
]
Photo = Annotated[UploadFile, File(description=f"A photo ({format_names()}).")]

#: Routes that read a text.
TEXT_ERRORS = responses(404, 422, 429, 503)
#: Routes that can write sentences: 501 without a caption decoder.
WRITING_ERRORS = responses(404, 422, 429, 501, 503)
#: Routes that read an uploaded photo.
PHOTO_STATUSES = (400, 413, 415, 422, 429, 501, 503)
