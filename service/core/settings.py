"""Service settings: the project's paths plus what only the server needs, each read from
an environment variable with the ``GROUNDSEARCH_`` prefix."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator

from groundsearch.common.settings import Settings

#: A write token shorter than this is refused at startup (it would be guessable).
MIN_TOKEN_CHARS = 16


class ServiceSettings(Settings):
    """Model, index and data paths, the write token and the request limits."""

    checkpoint: Path | None = Field(
        default=None, description="Joint model to serve (default: the shipped SDT-RNN)."
    )
    index_dir: Path | None = Field(
        default=None, description="Gallery folder: FAISS stores and uploaded photos."
    )
    write_token: SecretStr | None = Field(
        default=None, description="Bearer token for gallery writes; unset disables writes."
    )
    read_only: bool = Field(
        default=False,
        description="Serve the gallery as a replica: write nothing (no uploads, snapshots or "
        "rebuilds), follow the records and take up the writer's rebuilt indexes.",
    )
    shards: Path | None = Field(
        default=None,
        description="Search the gallery's photos on the shards in this folder (written by "
        "`groundsearch shard`), each a Ray Serve deployment on the Ray cluster at "
        "ray_address (`groundsearch serve --shards N` starts them). The server is then a "
        "read-only replica (read_only must be set).",
    )
    ray_address: str = Field(
        default="auto", description="The Ray cluster the shards run on (with shards)."
    )
    search_nprobe: int = Field(
        default=16, ge=1, description="Compressed (ivfpq) index: inverted lists searched."
    )
    search_k_factor: int = Field(
        default=32, ge=1, description="Compressed index: candidates re-ranked per result."
    )
    hnsw_ef_search: int = Field(default=64, ge=1, description="HNSW index: search list size.")
    max_upload_bytes: int = Field(default=10_000_000, ge=1, description="Largest upload.")
    max_pixels: int = Field(default=40_000_000, ge=1, description="Largest decoded photo.")
    max_text_chars: int = Field(default=500, ge=1, le=2000, description="Longest query.")
    max_k: int = Field(default=100, ge=1, description="Most results one request may ask.")
    max_captions: int = Field(default=20, ge=0, description="Captions per uploaded photo.")
    caption_bank: str = Field(
        default="training",
        description="Captions /describe draws from besides the gallery's: 'training' (the "
        "train+dev captions of Flickr8k and cc-web, those there, else the sample captions), "
        "'none', or a TSV/JSONL captions file.",
    )
    bank_parse_workers: int = Field(
        default=2, ge=1, le=8, description="Parser processes while embedding the bank once."
    )
    decoder: str = Field(
        default="default",
        description="Caption decoder that writes new sentences: 'default' (the shipped one, "
        "used when it was trained on the served checkpoint), 'none', or a decoder file "
        "(the word_tagger.npz beside it, if any, names a photo's nouns).",
    )
    decoder_beam: int = Field(
        default=3, ge=1, le=10, description="Beam width when writing sentences."
    )
    decoder_novel: bool = Field(
        default=True,
        description="Written sentences for a photo name one of the backbone's confident "
        "ImageNet classes (their everyday words; constrained beam search).",
    )
    decoder_rerank: bool = Field(
        default=False,
        description="Re-sort written sentences by the joint model's own score (parses each "
        "candidate: slower).",
    )
    relevance: str = Field(
        default="default",
        description="Relevance model that gives each hit its 'relevance': 'default' (the "
        "shipped one, used when it was fitted for the served checkpoint), 'none', or a "
        "relevance JSON file (which must be fitted for the served checkpoint; the "
        "vector_tagger.npz beside it, if any, gives its evidence).",
    )
    hubness: str = Field(
        default="default",
        description="Hubness correction of /search's text -> photo scores: 'default' (the "
        "hubness.npz beside the relevance file or the model directory's, used when it was "
        "chosen for the served checkpoint and the relevance was fitted on it), 'none', or "
        "a hubness file (which must be).",
    )
    fusion: str = Field(
        default="default",
        description="Short queries' fusion with what each photo shows (/search ranks a "
        "query of a word or two by its score fused with the classifier's and the tagger's "
        "evidence): 'default' (the fusion.json beside the relevance file or the model "
        "directory's, used when it was chosen for the served checkpoint and the relevance "
        "was fitted on it), 'none', or a fusion file (which must be).",
    )
    query_cache: int = Field(default=4096, ge=0, description="Query vectors kept in memory.")
    parse_workers: int = Field(
        default=1,
        ge=0,
        le=8,
        description="Parser processes (0: parse in the server process). Each takes ~0.5 GB.",
    )
    parse_warm_words: int = Field(
        default=20_000,
        ge=0,
        le=400_000,
        description="Commonest words whose parser inputs each parser computes at start "
        "(about a second and ~56 MB per 20,000 a process): a query's common words then skip their "
        "character models (0: none).",
    )
    torch_threads: int = Field(
        default=1,
        ge=1,
        description="Threads per torch (and numpy BLAS) operation: 1 lets concurrent requests "
        "use the cores (a short query's small matrix products lose time to thread "
        "synchronisation).",
    )

    parse_concurrency: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Requests parsing and encoding sentences at once (they are batched).",
    )
    parse_queue: int = Field(
        default=2, ge=0, description="Requests waiting to parse; more are refused (429)."
    )
    cnn_concurrency: int = Field(
        default=1,
        ge=1,
        le=16,
        description="Photos decoded and run through the backbone at once (each decode of a "
        "40-megapixel PNG holds ~160 MB while it lasts).",
    )
    cnn_queue: int = Field(
        default=1, ge=0, description="Photo requests waiting for the backbone; more: 429."
    )

    watch: str = Field(
        default="",
        description="Photo folders the server keeps indexed into its gallery, separated by "
        "':' (`serve --watch`): a full pass at startup, then every change within seconds. "
        "The server must be the gallery's writer (not read_only).",
    )
    watch_workers: int = Field(
        default=1,
        ge=0,
        le=16,
        description="CNN processes for the watched folders' photos (0: in the server process, "
        "on a niced thread; a process keeps a decoder crash out of the server).",
    )

    @field_validator("write_token")
    @classmethod
    def _strong_token(cls, token: SecretStr | None) -> SecretStr | None:
        if token is None or not token.get_secret_value():
            return None
        if len(token.get_secret_value()) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"GROUNDSEARCH_WRITE_TOKEN must be at least {MIN_TOKEN_CHARS} characters"
            )
        return token

    @model_validator(mode="after")
    def _one_writer(self) -> ServiceSettings:
        if self.read_only and self.watch_folders:
            raise ValueError(
                "a read-only replica cannot keep folders indexed (GROUNDSEARCH_WATCH): "
                "watch them with the gallery's writer"
            )
        if self.shards is not None and not self.read_only:
            raise ValueError(
                "a server over shards (GROUNDSEARCH_SHARDS) is a read-only replica: set "
                "GROUNDSEARCH_READ_ONLY=true and send writes to the gallery's writer"
            )
        return self

    @property
    def watch_folders(self) -> list[Path]:
        """The folders of ``watch``."""
        return [Path(p) for p in self.watch.split(os.pathsep) if p.strip()]

    @property
    def checkpoint_path(self) -> Path:
        return self.checkpoint or self.default_checkpoint

    @property
    def served_model(self) -> str:
        """The model served: 'shipped', 'taught: NAME', or the checkpoint named."""
        if self.checkpoint is not None:
            return str(self.checkpoint)
        if self.space_dir == self.model_dir:
            return "shipped"
        return f"taught: {self.space_dir.name}"

    @property
    def index_path(self) -> Path:
        return self.index_dir or self.gallery_dir

    def beside_relevance(self, setting: str, relevance_file: Path | None, name: str) -> Path | None:
        """The file a setting names: None for 'none', ``companion`` for 'default'."""
        value = str(getattr(self, setting))
        if value == "none":
            return None
        if value == "default":
            return self.companion(relevance_file, name)
        return Path(value)

    def companion(self, path: Path | None, name: str) -> Path:
        """The file ``name`` beside ``path`` when there is one, else the served model's."""
        if path is not None and (path.parent / name).exists():
            return path.parent / name
        return self.space_dir / name
