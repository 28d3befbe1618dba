"""The gallery: photos and captions, recorded, searched and written.

``gallery.Gallery`` owns a gallery folder: ``store.records`` is its SQLite system of
record, ``search`` its FAISS indexes, ``photo_writes`` its uploads, ``ingest`` walks a
user's folders into it. Layers, lowest first: ``errors`` and ``store``, ``search``,
``filters``, the modules here, ``ranking`` and ``ingest``.
"""

from groundsearch.index.errors import IdentityMismatch, StoreError, UnknownItemError

__all__ = ["IdentityMismatch", "StoreError", "UnknownItemError"]
