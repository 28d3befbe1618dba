"""The gallery: photos and captions, recorded, searched and written.

``gallery.Gallery`` owns a gallery folder as a whole (opening, searching, reading) and
delegates: ``records`` is its SQLite database, the system of record and the one module
that knows the schema (every statement is a function there); ``search_indexes.SearchIndexes``
keeps its two FAISS indexes (``vectors.VectorIndex``) up with the records (following
other processes' writes, compaction, snapshots); ``photo_writes.PhotoWrites``
(``gallery.writes``) adds and removes uploaded photos with their captions, whose files
``upload_files.UploadFiles`` holds. ``indexer`` walks a user's folders into a gallery
(``groundsearch index``), recording the files it finds through
``indexing_runs.IndexedFiles``; ``caption_bank`` is the captions ``/describe`` may
answer with; ``defaults`` picks the gallery ``groundsearch serve`` starts with. Text
comes in through ``groundsearch.model.runtime.sentences``. The layout shows the data
flow ``model/ → index/ → service/``.
"""

from groundsearch.index.errors import IdentityMismatch, StoreError, UnknownItemError

__all__ = ["IdentityMismatch", "StoreError", "UnknownItemError"]
