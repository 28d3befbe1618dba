"""Vector search: FAISS inner-product indexes derived from the records (flat, HNSW,
IVF-PQ, compressed on disk, sharded), and the pair a gallery searches with."""
