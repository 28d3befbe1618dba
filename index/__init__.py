"""Vector stores over the embedded gallery (FAISS inner-product indexes).

``VectorStore`` holds embedded images/captions with stable ids and metadata; it adds,
removes, searches and persists them atomically (see ``index.store``). The layout shows
the data flow ``model/ → index/ → service/``.
"""

from index.store import (
    IdentityMismatch,
    SearchHit,
    StoreError,
    UnknownItemError,
    VectorStore,
)

__all__ = ["IdentityMismatch", "SearchHit", "StoreError", "UnknownItemError", "VectorStore"]
