"""Records and files: the gallery's SQLite system of record, the photo files it reads
(walked, described by their EXIF, uploaded) and what is exported from it."""
