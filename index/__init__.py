"""The gallery: embedded photos and captions, stored, searched and written.

``gallery.Gallery`` owns a gallery folder as a whole (typed image and caption records,
adding and removing a photo with its captions, photo files); ``store.VectorStore`` is
one FAISS inner-product index with stable ids, metadata and atomic saves;
``defaults`` picks the gallery ``groundsearch serve`` starts with. The layout shows the
data flow ``model/ → index/ → service/``.
"""

from groundsearch.index.store import (
    IdentityMismatch,
    SearchHit,
    StoreError,
    UnknownItemError,
    VectorStore,
)

__all__ = ["IdentityMismatch", "SearchHit", "StoreError", "UnknownItemError", "VectorStore"]
