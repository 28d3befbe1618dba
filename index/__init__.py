"""The gallery: photos and captions, recorded, searched and written.

``gallery.Gallery`` owns a gallery folder as a whole (typed records, adding and
removing photos with their captions, following other processes' writes);
``records.Records`` is its SQLite database, the system of record; ``vectors.VectorIndex``
is the FAISS inner-product index derived from it. ``indexer`` walks a user's folders
into a gallery (``groundsearch index``), ``defaults`` picks the gallery ``groundsearch
serve`` starts with. The layout shows the data flow ``model/ → index/ → service/``.
"""

from groundsearch.index.errors import IdentityMismatch, StoreError, UnknownItemError

__all__ = ["IdentityMismatch", "StoreError", "UnknownItemError"]
