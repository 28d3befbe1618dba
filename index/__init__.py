"""The gallery: photos and captions, recorded, searched and written.

``gallery.Gallery`` owns a gallery folder; ``store.records`` is its SQLite system of
record, ``search.search_indexes`` keeps its FAISS indexes up with it,
``photo_writes`` adds and removes uploads (files in ``store.upload_files``), ``ingest``
walks a user's folders into it and ``caption_bank`` holds the captions ``/describe`` may
answer with. Data flows ``model/ → index/ → service/``. Inside, lowest first: ``errors``
and ``store``, ``search``, ``filters``, the modules here, ``ranking`` and ``ingest``.
"""

from groundsearch.index.errors import IdentityMismatch, StoreError, UnknownItemError

__all__ = ["IdentityMismatch", "StoreError", "UnknownItemError"]
