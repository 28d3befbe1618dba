"""Parse texts into dependency trees with the project's own stanza English models, loaded
from local files only (``download_method=None``): ``Parser(settings.parser_dir,
settings.cache_dir).parse(["Students ride bikes at night."])``."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from groundsearch.common.files import write_text
from groundsearch.model.runtime.parsing.cache import ParseCache
from groundsearch.model.runtime.parsing.direct import DirectParser
from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain, file_digest
from groundsearch.model.runtime.parsing.tree import DependencyTree, build_tree

#: Bumped when the conversion from stanza output to trees changes.
TREE_FORMAT = 1
#: Longest text accepted, in characters after whitespace is normalised.
MAX_TEXT_CHARS = 2000
PROCESSORS = "tokenize,mwt,pos,lemma,depparse"
#: Model file names inside the parser directory, by pipeline processor.
MODEL_FILES = {name: f"{name}.pt" for name in PROCESSORS.split(",")}

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ParseError(ValueError):
    """A text that cannot be parsed, with the reason."""


class ParserModelsMissing(FileNotFoundError):
    """The trained stanza models are not where the settings say."""


def clean_text(text: object, max_chars: int = MAX_TEXT_CHARS) -> str:
    """``text`` NFC-normalised, control characters and whitespace runs as one space;
    ParseError explaining why it cannot be parsed."""
    if not isinstance(text, str):
        raise ParseError(f"text must be a string, not {type(text).__name__}")
    text = " ".join(_CONTROL.sub(" ", unicodedata.normalize("NFC", text)).split())
    if not text:
        raise ParseError("text is empty (nothing but whitespace or control characters)")
    if len(text) > max_chars:
        raise ParseError(f"text is {len(text)} characters long; the limit is {max_chars}")
    return text


def model_paths(parser_dir: Path) -> dict[str, Path]:
    """The model file of each processor, checked to exist."""
    paths = {name: parser_dir / fname for name, fname in MODEL_FILES.items()}
    if missing := [str(p) for p in paths.values() if not p.exists()]:
        raise ParserModelsMissing(
            f"stanza models not found: {', '.join(missing)} (train them with "
            "`groundsearch train-parser`)"
        )
    return paths


def parser_version(parser_dir: Path) -> str:
    """Identity of the parser: stanza version (read from the installed distribution: no
    slow import), tree format and model file digests."""
    from importlib.metadata import version

    manifest = parser_dir / "manifest.json"
    if manifest.exists():
        digests = json.loads(manifest.read_text())["files"]
    else:
        digests = {n: file_digest(p) for n, p in model_paths(parser_dir).items()}
    blob = json.dumps([version("stanza"), TREE_FORMAT, digests], sort_keys=True)
    return "stanza-ewt-" + hashlib.sha256(blob.encode()).hexdigest()[:12]


def load_pipeline(parser_dir: Path, cache_dir: Path) -> Any:  # a stanza.Pipeline
    """A stanza pipeline that reads only the local model files."""
    import stanza

    paths = model_paths(parser_dir)
    pretrain = ensure_pretrain(cache_dir)
    resources = cache_dir / "stanza-resources"
    resources.mkdir(parents=True, exist_ok=True)
    if not (resources / "resources.json").is_file():  # parser processes start side by side
        write_text(resources / "resources.json", "{}")
    logging.getLogger("stanza").setLevel(logging.ERROR)
    return stanza.Pipeline(
        lang="en",
        dir=str(resources),
        processors=PROCESSORS,
        download_method=None,
        allow_unknown_language=True,
        use_gpu=False,
        logging_level="ERROR",
        tokenize_model_path=str(paths["tokenize"]),
        tokenize_max_seqlen=1000,
        mwt_model_path=str(paths["mwt"]),
        pos_model_path=str(paths["pos"]),
        pos_pretrain_path=str(pretrain),
        lemma_model_path=str(paths["lemma"]),
        depparse_model_path=str(paths["depparse"]),
        depparse_pretrain_path=str(pretrain),
    )


def doc_to_tree(text: str, doc: Any) -> DependencyTree:  # doc: a stanza.Document
    """One tree for a stanza document; later sentences hang off the first root."""
    heads: list[int] = []
    columns: list[list[str]] = [[] for _ in range(6)]
    words, lemmas, upos, xpos, feats, deprels = columns
    first_root = 0
    for sentence in doc.sentences:
        offset = len(words)
        for w in sentence.words:
            words.append(w.text)
            lemmas.append(w.lemma or w.text)
            upos.append(w.upos or "X")
            xpos.append(w.xpos or "_")
            feats.append(w.feats or "_")
            if w.head:
                heads.append(offset + w.head)
                deprels.append(w.deprel or "dep")
            elif not first_root:
                first_root = offset + w.id
                heads.append(0)
                deprels.append("root")
            else:
                heads.append(first_root)
                deprels.append("parataxis")
    if not words:
        raise ParseError("the text contains no words")
    return build_tree(
        text, words, lemmas, upos, xpos, feats, heads, deprels, sentences=len(doc.sentences)
    )


class Parser:
    """Batched text → tree parsing with the models in ``parser_dir``, the GloVe pretrain
    and (``use_cache``) the parse cache in ``cache_dir``. ``direct`` runs the models
    directly (:mod:`.direct`: the same trees for 99.9 % of captions, faster); False runs
    every text through ``stanza.Pipeline`` (``Settings.parse_pipeline``)."""

    def __init__(
        self, parser_dir: Path, cache_dir: Path, use_cache: bool = True, direct: bool = True
    ) -> None:
        self.parser_dir = Path(parser_dir)
        self.cache_dir = Path(cache_dir)
        model_paths(self.parser_dir)
        self.version = parser_version(self.parser_dir)
        cache = ParseCache(self.cache_dir / "parses.sqlite", self.version) if use_cache else None
        self.cache = cache
        self.direct = direct
        self._pipeline = None
        self._direct: DirectParser | None = None
        self._lock = threading.Lock()  # a stanza pipeline is not safe to share between threads

    @property
    def pipeline(self) -> Any:  # a stanza.Pipeline
        with self._lock:
            if self._pipeline is None:
                self._pipeline = load_pipeline(self.parser_dir, self.cache_dir)
        return self._pipeline

    @property
    def direct_parser(self) -> DirectParser:
        """The direct path over this parser's models (built on first use)."""
        pipeline = self.pipeline
        with self._lock:
            if self._direct is None:
                self._direct = DirectParser(pipeline, self._pipeline_trees)
        return self._direct

    def warm(self, n_words: int) -> None:
        """Load the models and compute the direct path's columns of the ``n_words``
        commonest words now (:meth:`.DirectParser.warm`): a server's, before its first query."""
        if self.direct and n_words > 0:
            self.direct_parser.warm(n_words)
        else:
            self.pipeline  # noqa: B018 - loads it

    def _trees(self, texts: list[str]) -> list[DependencyTree]:
        """Parse cleaned texts (the caller holds the lock)."""
        if not self.direct:
            return self._pipeline_trees(texts)
        assert self._direct is not None
        return self._direct.parse(texts)

    def _pipeline_trees(self, texts: list[str]) -> list[DependencyTree]:
        assert self._pipeline is not None
        docs = self._pipeline.bulk_process(texts)
        return [doc_to_tree(t, d) for t, d in zip(texts, docs, strict=True)]

    def parse(
        self, texts: Sequence[str], batch_size: int = 512, workers: int = 1
    ) -> list[DependencyTree]:
        """Parse texts into trees, in order (``workers`` > 1: what the cache lacks in that
        many processes); ParseError naming a bad text."""
        if isinstance(texts, str):
            raise ParseError("parse() takes a list of texts, not a single string")
        cleaned = []
        for i, t in enumerate(texts):
            try:
                cleaned.append(clean_text(t))
            except ParseError as exc:
                raise ParseError(f"text {i}: {exc}") from None
        trees = self.cache.get_many(cleaned) if self.cache is not None else [None] * len(cleaned)
        todo = sorted({t for t, tree in zip(cleaned, trees, strict=True) if tree is None})
        parsed: dict[str, DependencyTree] = {}
        in_processes = workers > 1 and len(todo) >= 4 * batch_size
        for start in range(0, len(todo), len(todo) if in_processes else batch_size):
            chunk = todo if in_processes else todo[start : start + batch_size]
            if in_processes:
                from groundsearch.model.runtime.parsing.pool import parse_in_processes

                args = (self.parser_dir, self.cache_dir, workers)
                trees_of = parse_in_processes(chunk, *args, direct=self.direct)
            else:
                self.direct_parser if self.direct else self.pipeline  # noqa: B018 - loaded outside the lock
                with self._lock, _threads_for(len(chunk)):
                    trees_of = self._trees(chunk)
            new = list(zip(chunk, trees_of, strict=True))
            parsed.update(new)
            if self.cache is not None:
                self.cache.put_many(new)
        return [tree or parsed[t] for t, tree in zip(cleaned, trees, strict=True)]

    def parse_one(self, text: str) -> DependencyTree:
        """Parse a single text."""
        return self.parse([text])[0]


#: Up to this many texts, parse with one torch thread: for a short caption the extra
#: thread costs more in synchronisation than it saves (p50 21 ms vs 54 ms here).
SMALL_BATCH = 8


@contextmanager
def _threads_for(n_texts: int) -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    small = n_texts <= SMALL_BATCH and before > 1
    if small:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if small:
            torch.set_num_threads(before)
