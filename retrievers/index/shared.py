"""SharedIndex: documents + cached embeddings + a Chroma collection + bm25s indexes, per group.

Built once per (dataset corpus, embedding model, representation, HNSW settings) and reused by every retriever
in a run and, from disk, by the next run (the Chroma collection is persisted under the cache directory and
reopened when its content hash matches; bm25s indexes and MaxP units are verified cache files beside it; embeddings
come from the content-hash cache so nothing is embedded twice). The caches are safe to share between processes
running at once and survive kills and damaged files (``retrievers/cachefile.py``, ``retrievers/index/chroma.py``):
a bad entry is one ``evalkit: cache: …`` line on stderr and is recomputed.

Long documents. MiniLM reads at most 256 word pieces. Two representations (recorded in the manifest):

* ``truncate`` — one vector per document, the model truncates at 256 tokens (what MTEB did for the published
  all-MiniLM-L6-v2 numbers on BEIR; used for SciFact so the baseline is comparable);
* ``maxp`` — the document is split on line boundaries into pieces of at most 256 tokens (a line longer than that
  is split by token windows) and a document scores by its best piece (MaxP); the document's own vector (used by
  cosine stages) is the normalised mean of its pieces. Used for LoCoMo, the memory workspace and any document longer
  than the model's window, so evidence deep inside a long text is still reachable;
* ``maxp-user`` — as ``maxp`` but only over the user side of a chat session ("user: …" turns). Used for
  LongMemEval-S sessions in ``make bench``: embedding every turn of the 17.5k distinct S sessions (181 M characters)
  takes ~1.5 h on 2 cores, the user side (18 M characters) ~10 minutes. Evidence said only by the assistant
  (``single-session-assistant`` questions) is then reachable by BM25 (which indexes the full session) but not by
  the vector arm; ``make bench-full`` uses full ``maxp``. The choice is in every manifest.

Vector backends: ``exact`` (the default: top-k computed exactly over the visible vectors, one BLAS product per block
of queries for the shortlist and a float64 final score, so every process and machine gets the same bits —
:mod:`retrievers.index.exact`; Chroma stays the store of record: an index of at least ``store.MIN_UNITS`` vector units
writes its vectors and metadata once per content to a collection the search's matrix is checked against,
:meth:`SharedIndex.record_store`, :mod:`retrievers.index.store`), ``hnsw`` (Chroma's approximate HNSW, embedded
``PersistentClient``, cosine space set
explicitly, HNSW parameters configurable and recorded; ``chroma`` is its older name; a run states its recall@k against
exact on a sample, :meth:`SharedIndex.hnsw_recall`), ``chroma-http`` (HNSW through ``HttpClient`` to a ``chroma run``
server; host/port from the ``EVALKIT_CHROMA_URL`` environment variable or arguments).
Groups (LoCoMo conversations, LongMemEval haystacks) are separate stores: a query only searches its group
(a ``where`` filter on the group in Chroma; a row subset in numpy).

As of its own ``as_of``: under the ``strict`` visibility protocol a query searches only the documents of its group
created at or before its ``as_of`` (undated ones always) — :mod:`retrievers.index.visibility`; both searches take the
queries' ``as_of`` and apply the rule inside the search (Chroma: the visible record ids; numpy: the visible rows;
bm25s: a score mask), so depth stays exact.
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from retrievers import cachefile
from retrievers.embed import progress
from retrievers.embed.model import Embedder, cache_root
from retrievers.embed.stored import StoredVectors
from retrievers.index import exact, store
from retrievers.index.chroma import ChromaStore, check_folder
from retrievers.index.corpus import Corpus
from retrievers.index.lexical import LexicalIndex, build_many
from retrievers.index.visibility import VisibleSets
from retrievers.types import DataError, Dataset

#: vector backends: ``exact`` (default; :mod:`retrievers.index.exact`), ``hnsw`` (Chroma's HNSW, embedded; ``chroma``
#: is its older name), ``chroma-http`` (HNSW on a ``chroma run`` server)
BACKENDS = ("exact", "hnsw", "chroma", "chroma-http")
ID_FILTER_MAX = 20000  # largest group whose vector queries filter by record ids
#: latency mode's group-size threshold (vector units): every LongMemEval-S haystack (~85 sessions) and LoCoMo
#: conversation is far below it, as one user's memory store is; a filtered HNSW search over a shared collection of
#: ~40k units costs ~31 ms where exact search over the question's own haystack costs ~0.02 ms (issue 22)
LATENCY_EXACT_BELOW = 5000


@dataclass
class HNSWSettings:
    space: str = "cosine"
    ef_construction: int = 200
    ef_search: int = 200
    max_neighbors: int = 32

    def as_config(self) -> dict:
        return {"hnsw": {"space": self.space, "ef_construction": self.ef_construction,
                         "ef_search": self.ef_search, "max_neighbors": self.max_neighbors}}


@dataclass
class IndexSettings:
    backend: str = "exact"  # exact | hnsw (embedded Chroma) | chroma-http (HNSW on a Chroma server)
    representation: str = "auto"  # auto | truncate | maxp
    hnsw: HNSWSettings = field(default_factory=HNSWSettings)
    chroma_url: str | None = None  # http://127.0.0.1:8000 for chroma-http
    as_of_visibility: str = "auto"  # auto (the dataset's declared protocol) | strict | all
    # a visible set of at most this many vector units is searched exactly (numpy) instead of through HNSW: a memory
    # store of one user's size. 0 = never (quality runs, the gate). Latency mode sets LATENCY_EXACT_BELOW.
    exact_below: int = 0

    def record(self) -> dict:
        d = asdict(self)
        return d


def _canonical(backend: str) -> str:
    """``chroma`` (the embedded HNSW backend's older name) → ``hnsw``."""
    return "hnsw" if backend == "chroma" else backend


def _lengths(texts: list[str], tok, batch: int = 2048) -> list[int]:
    """Word pieces per text (no special tokens), through the tokenizer's batch call: a fast (Rust) tokenizer splits
    a batch in one call and gives each text the same ids as a call on that text alone. Only the counts are kept,
    batch by batch (the ids of a LongMemEval-S corpus, 6.7 M word pieces, would be ~0.5 GB of Python ints)."""
    out: list[int] = []
    for i in range(0, len(texts), batch):
        out.extend(len(ids) for ids in tok(texts[i:i + batch], add_special_tokens=False)["input_ids"])
    return out


_LENGTHS: dict[tuple, list[int]] = {}  # (tokenizer, sha256 of the texts) -> word pieces per text: the last corpora


def text_lengths(texts: list[str], tok) -> list[int]:
    """:func:`_lengths`, remembered for the last few lists of texts asked in this process (by content): the bench's
    estimate of a corpus's word pieces and the MaxP split of the same corpus tokenize it once, not twice.

    Usage (run by tests/unit/retrievers/index/test_shared.py)::

        tok = Embedder().tokenizer()
        text_lengths(["a memory note", "vlan"], tok)  # [3, 2]: the model's word pieces, no [CLS] / [SEP]
    """
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    key = (tok, h.hexdigest())
    got = _LENGTHS.get(key)
    if got is None:
        got = _LENGTHS[key] = _lengths(texts, tok)
        while len(_LENGTHS) > 4:
            del _LENGTHS[next(iter(_LENGTHS))]
    return list(got)


def _pack_lines(text: str, lines: list[str], lengths: list[int], tok, window: int) -> list[str]:
    """MaxP pieces of a text longer than ``window``, from its lines and their lengths (see :func:`split_pieces`)."""
    pieces, cur, cur_len = [], [], 0
    for line, n in zip(lines, lengths):
        if n > window:
            if cur:
                pieces.append("\n".join(cur))
                cur, cur_len = [], 0
            lids = tok(line, add_special_tokens=False)["input_ids"]
            for i in range(0, len(lids), window):
                pieces.append(tok.decode(lids[i:i + window]))
            continue
        if cur_len + n > window and cur:
            pieces.append("\n".join(cur))
            cur, cur_len = [], 0
        cur.append(line)
        cur_len += n
    if cur:
        pieces.append("\n".join(cur))
    return [p for p in pieces if p.strip()] or [text[:2000]]


def split_pieces_many(texts: list[str], tok, window: int) -> list[list[str]]:
    """:func:`split_pieces` of every text, tokenizing in batches: the texts first, then the lines of those longer
    than the window (the same pieces as one call per text; tests/unit/retrievers/index/test_shared.py checks it on
    real corpora)."""
    n = text_lengths(texts, tok)
    long = [i for i, m in enumerate(n) if m > window]
    lines = [texts[i].split("\n") for i in long]
    line_n = _lengths([ln for ls in lines for ln in ls], tok)
    out: list[list[str]] = [[t] for t in texts]
    at = 0
    for i, ls in zip(long, lines):
        out[i] = _pack_lines(texts[i], ls, line_n[at:at + len(ls)], tok, window)
        at += len(ls)
    return out


def split_pieces(text: str, tok, window: int) -> list[str]:
    """MaxP pieces of ``text``: the whole text when it fits ``window`` word pieces (``tok`` = the model's tokenizer,
    no special tokens), else consecutive runs of whole lines that fit, a line longer than the window cut into
    window-sized runs of word pieces (decoded). Empty pieces are dropped; never returns an empty list."""
    return split_pieces_many([text], tok, window)[0]


class SharedIndex:
    def __init__(self, dataset: Dataset, embedder: Embedder | None = None, settings: IndexSettings | None = None,
                 cache_dir: Path | None = None):
        if not dataset.documents:
            raise DataError(f"dataset {dataset.name!r} has an empty corpus: nothing to index")
        self.dataset = dataset
        self.settings = settings or IndexSettings()
        if self.settings.backend not in BACKENDS:
            raise DataError(f"unknown vector backend {self.settings.backend!r} (valid: {', '.join(BACKENDS)})")
        if self.settings.backend != _canonical(self.settings.backend):
            self.settings = replace(self.settings, backend=_canonical(self.settings.backend))
        dataset.as_of_visibility(self.settings.as_of_visibility)  # an unknown protocol fails before any work
        # a dataset with stored vectors (retrievers.embed.stored) is searched with them, exactly, one vector per
        # document
        self.stored = StoredVectors.for_dataset(dataset)
        if self.stored is not None:
            self.settings = replace(self.settings, backend="exact")
        self.embedder = self.stored or embedder or Embedder()
        self.cache_dir = cache_dir or cache_root()
        self.corpus = Corpus(dataset)
        rep = self.settings.representation
        self.representation_source = "--representation"
        if self.stored is not None:
            rep, self.representation_source = "stored", "the dataset's own vectors"
        if rep == "auto":
            rep = dataset.info.get("representation", "maxp")
            self.representation_source = ("dataset default: " + dataset.info["representation_why"]
                                          if dataset.info.get("representation_why") else
                                          "dataset default" if "representation" in dataset.info else "index default")
        if rep not in ("truncate", "maxp", "maxp-user") and self.stored is None:
            raise DataError(f"unknown document representation {rep!r} (valid: auto, truncate, maxp, maxp-user)")
        self.representation = rep
        self.key = hashlib.sha256(json.dumps([dataset.corpus_hash(), self.embedder.model_id, rep],
                                             sort_keys=True).encode()).hexdigest()[:20]
        g = self.corpus.groups
        self.group_names = sorted(set(g))
        self.group_code = {n: i for i, n in enumerate(self.group_names)}
        codes = np.array([self.group_code[x] for x in g], dtype=np.int64)
        self.doc_group = codes
        self.group_docs = {n: np.flatnonzero(codes == i) for n, i in self.group_code.items()}
        self.stats: dict = {"embedded_texts": 0, "units_built": False, "chroma_built": False, "bm25_built": 0,
                            "candidates_loaded": 0, "candidates_computed": 0}
        self._lex: dict[tuple, LexicalIndex] = {}
        self._collection = None
        self._store: ChromaStore | None = None
        self._records: ChromaStore | None = None  # the store of record under exact search (record_store)
        # exact backend: an index of at least store_min_units vector units writes its vectors and metadata to the
        # store of record, from a child process above store_max_units (retrievers.index.store: why). Not settings:
        # they change no result (nor any cache key).
        self.store_min_units, self.store_max_units = store.MIN_UNITS, store.MAX_UNITS
        self._group_ids: dict[str, list[str]] = {}
        self._layouts: dict[str, tuple] = {}  # group -> its units in visibility order (exact search)
        self._doc_units: tuple[np.ndarray, np.ndarray] | None = None
        self.hnsw_check: dict | None = None  # recall@k of HNSW against exact on a sample (backend hnsw/chroma-http)
        # the vector side (MaxP units, embeddings) is built when a vector search or a stage reading document vectors
        # first needs it: a lexical-only run loads no model and embeds nothing
        self._units: list[list[str]] | None = None
        self._unit_doc: np.ndarray | None = None
        self._vectors_built = False
        self.corpus.embeddings_loader = self.ensure_vectors
        self.visible = VisibleSets(self.corpus.created, self.group_docs, lambda: (self.unit_doc, self.group_units),
                                   self.corpus.visible_to, self.corpus.retired)

    # ---- lazily built vector side ---------------------------------------------------------------------
    @property
    def unit_doc(self) -> np.ndarray:
        """Document of each vector unit (MaxP piece, or the document itself)."""
        if self._unit_doc is None:
            self._build_layout()
        return self._unit_doc

    @property
    def group_units(self) -> dict[str, np.ndarray]:
        if self._unit_doc is None:
            self._build_layout()
        return self._group_units

    @property
    def unit_group(self) -> np.ndarray:
        if self._unit_doc is None:
            self._build_layout()
        return self._unit_group

    @property
    def unit_emb(self) -> np.ndarray:
        self.ensure_vectors()
        return self._unit_emb

    @property
    def vectors_built(self) -> bool:
        """Whether this index has embedded (or loaded) its document vectors."""
        return self._vectors_built

    def ensure_vectors(self) -> None:
        """Build the vector side now (MaxP units, document vectors) if it is not built yet."""
        if not self._vectors_built:
            self._build_units()
            self._vectors_built = True
            if self.settings.backend == "exact" and len(self.unit_doc) >= self.store_min_units:
                # the vectors go into the store of record (under HNSW it is collection())
                if self.record_store(open_large=False) is not None:
                    self._records.close()  # its HNSW segment leaves memory: exact search reads the same vectors

    def visibility(self, dataset: Dataset | None = None):
        """The as-of visibility protocol for queries of ``dataset`` (default: the indexed one): the settings'
        ``as_of_visibility`` unless ``auto``, else what the dataset declares."""
        return (dataset or self.dataset).as_of_visibility(self.settings.as_of_visibility)

    # ---- vectors -------------------------------------------------------------------------------------
    def _build_layout(self) -> None:
        """The vector units of every document (MaxP pieces: tokenizer needed; else one unit per document) and their
        document / group maps — no embedding."""
        texts = self.corpus.texts
        if self.stored is not None:
            units = [[t] for t in texts]
        elif self.representation in ("maxp", "maxp-user"):
            path = units_path(self.cache_dir, self.key)
            units = cachefile.read(path, check=lambda u: _bad_units(u, len(texts)))
            if units is None:
                self.stats["units_built"] = True
                with progress.step(f"splitting {len(texts):,} documents of {self.dataset.name} into MaxP pieces"):
                    tok = self.embedder.tokenizer()
                    side = user_lines if self.representation == "maxp-user" else (lambda t: t)
                    # the model reads max_seq_length pieces incl. [CLS] [SEP]
                    units = split_pieces_many([side(t) for t in texts], tok, self.embedder.max_seq_length - 2)
                cachefile.write(path, units)
        else:
            units = [[t] for t in texts]
        self._units = units
        unit_doc = np.repeat(np.arange(len(units)), [len(us) for us in units])
        self._unit_group = self.doc_group[unit_doc]
        self._group_units = {n: np.flatnonzero(self._unit_group == i) for n, i in self.group_code.items()}
        self._unit_doc = unit_doc

    def _build_units(self) -> None:
        units = self._units if self._unit_doc is not None else (self._build_layout() or self._units)
        texts = self.corpus.texts
        if self.stored is not None:
            emb = self.stored.document_vectors(self.dataset.documents)
            self.stats.update(embed_seconds=0.0, embedded_texts=0, units=len(texts))
            self._set_vectors(emb, units)
            return
        flat = [u for us in units for u in us]
        before = self.embedder.texts_embedded
        t0 = time.perf_counter()
        emb = self.embedder.encode(flat, desc=f"embedding {self.dataset.name}")
        self.stats["embed_seconds"] = time.perf_counter() - t0
        self.stats["embedded_texts"] = self.embedder.texts_embedded - before
        self.stats["units"] = len(flat)
        if emb.shape[1] != self.embedder.dim:
            raise DataError(f"embedding size {emb.shape[1]} does not match the model's {self.embedder.dim}")
        self._set_vectors(emb, units)

    def _set_vectors(self, emb: np.ndarray, units: list[list[str]]) -> None:
        flat_n = len(self.unit_doc)
        self._unit_emb = emb
        if flat_n == len(units):
            self.corpus.embeddings = emb
        else:
            sums = np.zeros((len(units), emb.shape[1]), dtype=np.float64)
            np.add.at(sums, self.unit_doc, emb)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            self.corpus.embeddings = (sums / np.where(norms > 0, norms, 1)).astype(np.float32)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.embedder.encode(texts, desc="embedding queries")

    # ---- chroma --------------------------------------------------------------------------------------
    @property
    def collection_name(self) -> str:
        h = self.settings.hnsw
        blob = json.dumps([self.key, asdict(h)], sort_keys=True).encode()
        return "ek-" + hashlib.sha256(blob).hexdigest()[:24]

    def _chroma_store(self) -> ChromaStore:
        if self._store is None:
            url = None
            if self.settings.backend == "chroma-http":
                url = self.settings.chroma_url or os.environ.get("EVALKIT_CHROMA_URL") or "http://127.0.0.1:8000"
            config = self.settings.hnsw.as_config()
            # Measured (chromadb 1.5.9): a collection that never reached HNSW's sync_threshold (default 1,000
            # records) is not written to its HNSW files; its vectors are replayed from the SQLite log on every
            # open, rewriting the HNSW files each time (so no manifest of them holds) and reading vectors no
            # checksum covers. A threshold of at most the record count makes the build end with everything in
            # the HNSW files, which then never change. Search results do not depend on it.
            config["hnsw"]["sync_threshold"] = max(2, min(1000, len(self.unit_doc)))
            self._store = ChromaStore(self.collection_name, self.cache_dir, url, config)
        return self._store

    def _chroma_call(self, fn, *args, **kwargs):
        """Every call to Chroma goes through here: a server that stops answering is one clear error line."""
        return self._chroma_store().call(fn, *args, **kwargs)

    def collection(self):
        """The verified Chroma collection of this index (built once, under a lock, when missing or damaged)."""
        if self._collection is None:
            t0 = time.perf_counter()
            self._collection, built = self._chroma_store().open(self._fill_collection, self._verify_collection)
            if built:
                self.stats["chroma_built"] = True
                self.stats["chroma_build_seconds"] = time.perf_counter() - t0
        return self._collection

    def _fill_collection(self, col, max_batch: int) -> None:
        n = len(self.unit_doc)
        step = max(1, min(max_batch, 5000))
        emb = self.unit_emb  # embedded first (its own progress line)
        with progress.step(f"indexing {n:,} vectors of {self.dataset.name} in Chroma (HNSW)", total=n,
                           unit="vectors") as line:
            for i in range(0, n, step):
                j = min(n, i + step)
                self._chroma_call(col.add, ids=[str(u) for u in range(i, j)], embeddings=emb[i:j],
                                  metadatas=[{"g": int(self.unit_group[u]), "d": int(self.unit_doc[u])}
                                             for u in range(i, j)])
                line.advance(j - i)
        self._chroma_call(col.modify, metadata={"complete": 1, "dataset": self.dataset.name})

    def _verify_collection(self, col, probes: int = 8) -> str | None:
        """Why ``col`` cannot serve this index (``None`` = it can): record count, the "complete" flag, and
        ``probes`` records spread over the collection, each queried with its own vector, must come back as
        themselves (or a record with the same vector) with their group and document."""
        n = len(self.unit_doc)
        count = self._chroma_call(col.count)
        if count != n:
            return f"{count} records, expected {n}"
        if (col.metadata or {}).get("complete") != 1:
            return "its build never finished"
        at = np.unique(np.linspace(0, n - 1, num=min(n, probes)).astype(np.int64))
        res = self._chroma_call(col.query, query_embeddings=self.unit_emb[at], n_results=1,
                                include=["distances", "metadatas"])
        for u, ids, metas in zip(at, res["ids"], res["metadatas"]):
            got = int(ids[0]) if ids else -1
            if not 0 <= got < n or (got != u and float(self.unit_emb[got] @ self.unit_emb[u]) < 1 - 1e-5):
                return f"probe record {u} found {ids[0] if ids else 'nothing'}"
            if metas[0] != {"g": int(self.unit_group[got]), "d": int(self.unit_doc[got])}:
                return f"probe record {u}: wrong metadata {metas[0]}"
        return None

    # ---- the store of record (exact backend) -------------------------------------------------------------
    @property
    def store_name(self) -> str:
        """The store of record's collection name: this index's content key (corpus, model, representation)."""
        blob = json.dumps([self.key, store.VERSION, store.HNSW]).encode()
        return "ek-rec-" + hashlib.sha256(blob).hexdigest()[:24]

    def _record_args(self):
        c = self.corpus
        return self.unit_emb, c.ids, c.groups, c.created, self.unit_doc

    def record_store(self, open_large: bool = True):
        """The verified store of record of this index (:mod:`retrievers.index.store`): its vectors and metadata in
        an embedded Chroma collection under the cache, built once per content (under a lock) when missing or
        damaged, and checked to hold the very vectors the exact search reads. Written when the vectors are built
        under the ``exact`` backend (:meth:`ensure_vectors`).

        Usage (run by tests/unit/retrievers/index/test_store.py)::

            col = index.record_store()
            col.get(where=store.visible_where("conv-1", as_of), include=[])["ids"]  # the visible units' ids

        A store above ``store_max_units`` is written and checked in a child process; with ``open_large=False``
        (what a run does) this process then only checks its sealed folder (every file's sha256 against the
        manifest; the collection's name carries the index's content key) and returns None: opening it here would
        load Chroma's copy of the vectors into the run (+1.4 GB at 10^6 notes, measured).
        """
        if self._records is None:
            self._records = ChromaStore(self.store_name, self.cache_dir, None, store.configuration(len(self.unit_doc)))
        args = self._record_args()
        n = len(args[0])
        t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
        sha = store.digest(args[0])
        apart = n > self.store_max_units and check_folder(self._records.folder) is not None  # missing or unsound
        if apart:
            with progress.step(f"writing {n:,} vectors of {self.dataset.name} to the Chroma store (child process)"):
                self.stats["store_writer_cpu"] = store.write_apart(self.store_name, self.cache_dir, *args)

        def fill(col, max_batch):
            with progress.step(f"writing {n:,} vectors of {self.dataset.name} to the Chroma store", total=n,
                               unit="vectors") as line:
                self.stats["store_writer_cpu"] = store.fill(col, *args, max_batch, self._records.call, line.advance)

        if n > self.store_max_units and not open_large:
            why = check_folder(self._records.folder)
            if why is not None:
                raise DataError(f"the Chroma store {self.store_name} written by its child process is unsound: {why}")
            col, built = None, False
        else:
            col, built = self._records.open(fill, lambda col: store.check(col, *args, self._records.call,
                                                                          vectors_digest=sha))
        self.stats["store_records"] = n
        self.stats["store_check"] = "sealed folder" if col is None else "opened and probed"
        if built or apart:
            self.stats["store_built"] = True
            self.stats["store_build_seconds"] = time.perf_counter() - t0
            # Chroma's Rust threads included, and the child's when it wrote the store
            self.stats["store_build_cpu_seconds"] = time.process_time() - c0 + _children_cpu() - k0
        return col

    def drop_persisted(self) -> None:
        """Delete this index's persisted Chroma collections and bm25s caches (tests, `--rebuild`)."""
        if self.settings.backend != "exact":
            self._chroma_store().drop()
        else:
            ChromaStore(self.store_name, self.cache_dir).drop()
        self._collection = None
        shutil.rmtree(self.cache_dir / "bm25" / self.key, ignore_errors=True)

    def close(self) -> None:
        """Release the embedded Chroma client of this index (its HNSW index leaves this process's memory)."""
        self._collection = None
        for st in (self._store, self._records):
            if st is not None:
                st.close()

    # ---- search --------------------------------------------------------------------------------------
    def vector_search(self, qemb: np.ndarray, groups: list[str], depth,
                      backend: str | None = None, as_of=None, query_ids: list[str] | None = None
                      ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query: (doc indices, cosine scores) of the best ``depth`` documents of its group (MaxP over units).

        ``depth`` is one int for every row or one per row: rows sharing a group, a visible set and a result size go
        to Chroma in one call (a query's hits do not depend on the other queries of the call), so several vector
        arms of one query cost one backend round trip. ``as_of`` (one per row, None = no rule): each row searches
        only the documents visible at its ``as_of`` (:mod:`retrievers.index.visibility`) — the k best visible ones.
        ``query_ids`` (one per row): whose search it is, for the scoped notes of a group (visible to their queries
        only, with or without ``as_of``)."""
        backend = _canonical(backend or self.settings.backend)
        depths = [int(depth)] * len(groups) if np.ndim(depth) == 0 else [int(d) for d in depth]
        out: list = [None] * len(groups)
        by_group: dict[tuple[str, int | None], list[int]] = {}
        exact_rows: dict[str, list[tuple[int, object]]] = {}  # group -> (row, visible set): one product per group
        for i, g in enumerate(groups):
            by_group.setdefault((g or "", self.visible.key(g or "", None if as_of is None else as_of[i],
                                                           None if query_ids is None else query_ids[i])),
                                []).append(i)
        for (g, vis), rows in by_group.items():
            if g not in self.group_code:
                for i in rows:
                    out[i] = (np.zeros(0, dtype=np.int64), np.zeros(0))
                continue
            if backend == "exact":  # no visible set built: the exact search reads a prefix (or builds it there)
                exact_rows.setdefault(g, []).extend((i, vis) for i in rows)
                continue
            seen = self.visible.get(g, vis)
            units = seen.units
            n_docs = len(seen.docs)
            if len(units) <= self.settings.exact_below or not self._chroma_can_filter(seen, vis):
                exact_rows.setdefault(g, []).extend((i, vis) for i in rows)
                continue
            col = self.collection()
            per_doc = max(1, len(units) // max(1, n_docs))
            by_k: dict[int, list[int]] = {}
            for i in rows:
                by_k.setdefault(min(len(units), max(depths[i] * per_doc * 2, depths[i])), []).append(i)
            for k, qs in by_k.items():
                ids, dists = [], []
                step = max(1, 8192 // k)  # Chroma's SQLite layer caps variables per statement
                for s0 in range(0, len(qs), step):
                    res = self._chroma_call(col.query, query_embeddings=qemb[qs[s0:s0 + step]], n_results=k,
                                            include=["distances"], **self.group_filter(g, vis))
                    ids += res["ids"]
                    dists += res["distances"]
                for r, i in enumerate(qs):
                    # record id = unit position (see collection()), so the document is unit_doc[id]: no metadata
                    # fetch per hit
                    docs = self.unit_doc[np.array(ids[r], dtype=np.int64)] if ids[r] else np.zeros(0, np.int64)
                    sims = 1.0 - np.asarray(dists[r], dtype=np.float64)
                    got = _maxp(docs, sims, depths[i])
                    if len(got[0]) < min(depths[i], n_docs) and k < len(units):  # not enough distinct documents
                        exact_rows.setdefault(g, []).append((i, vis))
                        continue
                    out[i] = got
        for g, jobs in exact_rows.items():
            for i, h in self._exact_group(g, qemb, sorted(jobs, key=lambda job: job[0]), depths):
                out[i] = h
        return out

    def _exact_group(self, g: str, qemb: np.ndarray, jobs: list[tuple[int, object]], depths: list[int]):
        """(row, hits) of exact search for ``jobs`` = (row, visibility key) of group ``g``: rows whose visible set is
        a prefix of the group's visibility order (:meth:`VisibleSets.prefix`) read it as a slice of
        :meth:`exact_layout` (:func:`exact.search_prefix`); the others (scoped notes, revised versions) gather
        their visible units (:func:`exact.search`). Same documents, same bits either way."""
        prefix = [self.visible.prefix(g, vis) for _, vis in jobs]
        fast = [(i, p) for (i, _), p in zip(jobs, prefix) if p is not None]
        if fast:
            vectors, unit_doc, ends, starts = self.exact_layout(g)
            rows = [i for i, _ in fast]
            limits = [int(ends[p - 1]) if p else 0 for _, p in fast]
            yield from zip(rows, exact.search_prefix(qemb[rows], vectors, unit_doc, limits,
                                                     [depths[i] for i in rows], starts))
        slow = [(i, self.visible.get(g, vis)) for (i, vis), p in zip(jobs, prefix) if p is None]
        if slow:
            rows = [i for i, _ in slow]
            gu = self.group_units[g]
            yield from zip(rows, exact.search(qemb[rows], self.unit_emb[gu], self.unit_doc[gu],
                                              [seen.cols for _, seen in slow], [depths[i] for i in rows],
                                              one_per_doc=len(gu) == len(self.group_docs[g])))

    def exact_layout(self, g: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Group ``g``'s units in visibility order (:meth:`VisibleSets.order`): (vectors, their documents, the unit
        count after each document of the order, each document's first unit or None when every document has one).

        Built once per group. The vectors are a view of :attr:`unit_emb` — no copy — when the order keeps the
        group's units as one run in place (a store written in creation order, or undated: SciFact, the scale
        store); otherwise a float32 copy of the group's rows (once, never per query)."""
        lay = self._layouts.get(g)
        if lay is None:
            docs = self.visible.order(g)
            if self._doc_units is None:  # units per document, first unit of each (unit_doc is non-decreasing)
                n_units = np.bincount(self.unit_doc, minlength=self.corpus.n)
                self._doc_units = (n_units, np.cumsum(n_units) - n_units)
            counts, first = self._doc_units[0][docs], self._doc_units[1][docs]
            ends = np.cumsum(counts)
            units = np.repeat(first - (ends - counts), counts) + np.arange(int(ends[-1]) if len(ends) else 0)
            if len(units) and units[-1] - units[0] == len(units) - 1 and np.all(np.diff(units) == 1):
                run = slice(int(units[0]), int(units[-1]) + 1)
                vectors, unit_doc = self.unit_emb[run], self.unit_doc[run]
            else:
                vectors, unit_doc = self.unit_emb[units], self.unit_doc[units]
            starts = None if np.all(counts == 1) else ends - counts
            lay = self._layouts[g] = (vectors, unit_doc, ends, starts)
        return lay

    def hnsw_recall(self, qemb: np.ndarray, groups: list[str], depth: int, as_of=None,
                    query_ids: list[str] | None = None, sample: int = 64) -> dict:
        """Recall@``depth`` of this index's approximate (HNSW) search against exact search on a sample of rows
        (``sample`` evenly spaced): |HNSW top-k ∩ exact top-k| / |exact top-k|, averaged over the sampled rows.
        What a run with ``--backend hnsw`` states in its manifest."""
        n = len(groups)
        at = np.unique(np.linspace(0, n - 1, num=min(n, sample)).astype(np.int64)) if n else np.zeros(0, np.int64)
        pick = (lambda xs: None if xs is None else [xs[i] for i in at])
        args = ([groups[i] for i in at], depth)
        approx = self.vector_search(qemb[at], *args, as_of=pick(as_of), query_ids=pick(query_ids))
        exact_ = self.vector_search(qemb[at], *args, backend="exact", as_of=pick(as_of), query_ids=pick(query_ids))
        rec = [len(set(a[0].tolist()) & set(e[0].tolist())) / len(e[0]) for a, e in zip(approx, exact_) if len(e[0])]
        return {"k": int(depth), "queries": len(rec), "recall": round(float(np.mean(rec)), 4) if rec else None}

    @staticmethod
    def _chroma_can_filter(seen, vis: int | None) -> bool:
        """False for a visible set Chroma cannot take as one id list (none visible, or more than
        ``ID_FILTER_MAX`` units): such rows are searched exactly in numpy over the visible units instead."""
        return vis is None or 0 < len(seen.units) <= ID_FILTER_MAX

    def group_filter(self, g: str, vis: int | None = None) -> dict:
        """Chroma keyword arguments restricting a query to group ``g``'s units (none for a one-group index), or,
        with a visibility key, to the units visible under it (their record ids).

        The group's record ids (``ids=``) select exactly the records the metadata filter ``where={"g": code}``
        selects, so the results are the same, but Chroma resolves a short id list in ~1 ms where it spends
        ~10 ms evaluating the metadata filter on every call (LoCoMo, 5.9k units). Groups larger than
        ``ID_FILTER_MAX`` units keep the metadata filter (one SQL variable per id)."""
        if vis is not None:
            return {"ids": self.visible.get(g, vis).record_ids()}
        if len(self.group_names) <= 1:
            return {}
        units = self.group_units[g]
        if len(units) > ID_FILTER_MAX:
            return {"where": {"g": self.group_code[g]}}
        ids = self._group_ids.get(g)
        if ids is None:
            ids = self._group_ids[g] = [str(u) for u in units]
        return {"ids": ids}

    def lexical(self, group: str, tokenizer: str, k1: float = 1.2, b: float = 0.75) -> LexicalIndex:
        key = (group, tokenizer, k1, b)
        lex = self._lex.get(key)
        if lex is None:
            self._load_lexical(tokenizer, k1, b)
            lex = self._lex[key]
        return lex

    def _load_lexical(self, tokenizer: str, k1: float, b: float) -> None:
        """All groups' bm25s indexes for one tokenizer: from the verified cache file if sound, else built and
        written."""
        # The pickle names LexicalIndex by its module path, so the entry name carries that path too: clones of
        # another module layout sharing the cache (the library's root held the module before it was split into
        # layers) keep their own entries instead of rejecting and rewriting each other's.
        path = (self.cache_dir / "bm25" / self.key
                / f"{tokenizer}-{k1}-{b}-{LexicalIndex.__module__}{cachefile.SUFFIX}")
        groups = set(self.group_docs)
        loaded = cachefile.read(path, check=lambda d: None if isinstance(d, dict) and set(d) == groups
                                else "not this index's groups")
        if loaded is None:
            t0 = time.perf_counter()
            texts = self.corpus.texts
            with progress.step(f"BM25 index of {self.dataset.name} ({tokenizer}, {len(self.group_docs):,} groups)",
                               total=len(self.group_docs), unit="groups") as line:
                loaded = build_many({g: [texts[d] for d in docs] for g, docs in self.group_docs.items()},
                                    tokenizer, k1, b, on_group=line.advance)
            cachefile.write(path, loaded)
            self.stats["bm25_built"] += len(loaded)
            self.stats.setdefault("bm25_build_seconds", 0.0)
            self.stats["bm25_build_seconds"] += time.perf_counter() - t0
        for g, lex in loaded.items():
            self._lex[(g, tokenizer, k1, b)] = lex

    def release_lexical(self) -> None:
        """Drop the bm25s indexes held in memory; a later lexical search reads them back from their cache file (or
        builds them again). A quality run calls it once its candidate set is built, as every lexical search of the
        run has happened by then: LongMemEval-S's 468 groups hold ~0.65 GB per tokenizer in memory."""
        self._lex.clear()

    def lexical_search(self, text: str, group: str, tokenizer: str, depth: int, match: str = "any",
                       k1: float = 1.2, b: float = 0.75, as_of: float | None = None, query_id: str | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
        """(doc indices, BM25 scores) of the best ``depth`` documents of the group; with ``as_of``, of the documents
        visible at ``as_of`` (the bm25s scores of the others are masked before the top ``depth`` is taken); a scoped
        note only for the query (``query_id``) it is addressed to."""
        if (group or "") not in self.group_code:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        lex = self.lexical(group or "", tokenizer, k1, b)
        visible = self.visible.get(group or "", self.visible.key(group or "", as_of, query_id)).positions
        pos, sc = lex.top(text, depth, match, visible)
        return self.group_docs[group or ""][pos], sc

    def manifest(self) -> dict:
        return {"representation": self.representation, "representation_source": self.representation_source,
                "embedding": self.embedder.describe() if hasattr(self.embedder, "describe") else None,
                "backend": self.settings.backend,
                "hnsw": asdict(self.settings.hnsw), "embedding_model": self.embedder.model_id,
                # None: the run searched no vectors, so the units were never built
                "units": int(len(self._unit_doc)) if self._unit_doc is not None else None,
                "documents": self.corpus.n, "groups": len(self.group_names),
                "collection": self.collection_name if self.settings.backend != "exact" else None,
                # the store of record under exact search (None: no vectors were built, or another backend)
                "store": self.store_name if "store_records" in self.stats else None,
                "search": ("exact (float32 shortlist, float64 final score, ties by document)"
                           if self.settings.backend == "exact" else "approximate (HNSW)"),
                **({"hnsw_recall_vs_exact": self.hnsw_check} if self.hnsw_check else {}),
                "index_key": self.key,
                "work": {k: v for k, v in self.stats.items() if not k.endswith("seconds")}}


REPRESENTATIONS = {
    "truncate": "one vector per document: title + text truncated at the model's max word pieces",
    "maxp": "long documents split on line boundaries at the model's window, scored by their best piece (MaxP)",
    "maxp-user": "MaxP over the user side of each chat session only",
    "stored": "one stored vector per document and per query (retrievers.embed.stored), searched by exact cosine",
}


def describe_representation(idx: dict) -> str:
    """One line for a run's header and report from :meth:`SharedIndex.manifest`: which representation, why, and
    which embedding model."""
    rep = idx.get("representation")
    emb = idx.get("embedding") or {}
    if idx.get("vectors_used") is False:  # the representation is the vectors': moot when none were read
        return "no embeddings: no retriever of the run reads vectors"
    model = (f"; embeddings {emb.get('model')}" if emb.get("backend") == "stored" else
             f"; embeddings {emb.get('model')} ({emb.get('backend')}, max {emb.get('max_length')} word pieces)"
             if emb else (f"; embeddings {idx['embedding_model']}" if idx.get("embedding_model") else ""))
    return (f"representation {rep} ({idx.get('representation_source', 'dataset default')}) — "
            f"{REPRESENTATIONS.get(rep, rep)}{model}")


def units_path(cache_dir: Path, key: str) -> Path:
    """The verified cache file of an index's MaxP units (the texts each document is split into)."""
    return Path(cache_dir) / "units" / f"{key}{cachefile.SUFFIX}"


def _bad_units(units, n_docs: int) -> str | None:
    if not isinstance(units, list) or len(units) != n_docs:
        return "not this corpus's units"
    if not all(isinstance(us, list) and us and all(isinstance(u, str) for u in us) for us in units):
        return "malformed units"
    return None


def user_lines(text: str) -> str:
    """The user side of a chat session ("user: …" turns and their continuation lines); the whole text if none."""
    keep, on = [], False
    for line in text.split("\n"):
        if line.startswith("user:"):
            on = True
        elif line.startswith("assistant:"):
            on = False
        if on:
            keep.append(line)
    return "\n".join(keep) if keep else text


_maxp = exact.maxp


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the store's writer, :func:`store.write_apart`)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
