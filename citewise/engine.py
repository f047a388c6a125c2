"""The engine: ingest into a knowledge base, and ``ask``, the one place where the answer path
and the refusal path meet.

    question ─► embed ─► dense + BM25 ─► RRF ─► MMR ─► gate
        gate refuses ─► Refusal (the generator is never called)
        gate answers ─► generator ─► citation check ─► Answer, or Refusal if nothing survives
    every question ─► query log
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from citewise.answer import (
    absent,
    citations,
    drafting,
    evidence,
    followup,
    gate,
    parts,
    plain,
    sentence_vectors,
    signals,
    streaming,
    support,
)
from citewise.answer.questions import check_history, check_question
from citewise.embedders import DEFAULT_EMBEDDER, REFERENCE_PATH, Embedder, embedder_of, get_embedder
from citewise.embedders.questions_in_flight import marked_steps, marks
from citewise.errors import ConfigError, DimensionMismatchError, GenerationError, QueryError
from citewise.generators import (
    CondensingGenerator,
    StreamingGenerator,
    get_generator,
    is_extractive,
)
from citewise.ingest.chunking import DEFAULT_CHUNKER, Chunker, get_chunker
from citewise.ingest.documents import Skipped, read_all
from citewise.kb import KBConfig, KnowledgeBase, Retrieval
from citewise.reader import Reader, get_reader, reading
from citewise.records import (
    Answer,
    Decision,
    Document,
    Part,
    Refusal,
    Signals,
    Turn,
)
from citewise.search import retrieval
from citewise.stores.roles import Knowledge
from citewise.stores.sentence_rows import SentenceVectors

EMBED_BATCH_CHUNKS = 128
PROVIDER_FAILED = drafting.PROVIDER_FAILED


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    chunks: int = 0
    seconds: float = 0.0
    embed_path: str = ""  # the local model's execution path that embedded them ("": another embedder)


@dataclass(frozen=True)
class Decided:
    """One question retrieved, the gate's signals read from what was found, and its decision
    (``Engine.decide``). ``sentences`` answers the context sentences' vectors from the store
    (``sentence_vectors.for_context``): read once for the gate, reused by the answer path."""

    retrieved: retrieval.Retrieved
    signals: Signals
    decision: Decision
    sentences: sentence_vectors.StoredFirst = field(compare=False, repr=False)
    closest: reading.Closest | None = None  # the unit the reader read closest to answering


class Engine:
    def __init__(self, store: Knowledge, provider_detail: bool = True) -> None:
        """``provider_detail=False`` (the HTTP service): a refusal or warning says only that
        the generation provider failed; what it answered is logged, never shown."""
        self.store, self.provider_detail = store, provider_detail

    def _why(self, failure: GenerationError) -> str:
        return drafting.why(failure, self.provider_detail)

    # -- ingest ---------------------------------------------------------------------------

    def open_kb(self, name: str, embedder: str | None = None, chunker: str | None = None,
                create: bool = True) -> KnowledgeBase:
        from citewise.errors import KnowledgeBaseError

        try:
            kb = self.store.get_kb(name)
        except KnowledgeBaseError:
            if not create:
                raise
            return self.create_kb(name, embedder, chunker)
        if embedder and get_embedder(embedder).name != kb.config.embedder:
            raise ConfigError(
                f"Knowledge base {name!r} is embedded with {kb.config.embedder}; "
                f"it cannot take {embedder} vectors. Use `citewise replay` to move it to a new "
                "embedder, or ingest into a new knowledge base."
            )
        if chunker and chunker != kb.config.chunker:
            if self.store.count_chunks(kb):
                raise ConfigError(
                    f"Knowledge base {name!r} is chunked with {kb.config.chunker!r}; its stored "
                    f"documents would not be re-chunked with {chunker!r}. Ingest into a new "
                    "knowledge base instead."
                )
            get_chunker(chunker, lambda t: len(t.split()), 512)  # validate the name
            kb = self.store.update_kb(name, replace(kb.config, chunker=chunker))
        return kb

    def create_kb(self, name: str, embedder: str | None = None, chunker: str | None = None,
                  tenant: int = 0) -> KnowledgeBase:
        """A new, empty knowledge base (of ``tenant``, 0: the operator's own);
        ``AlreadyExistsError`` if the store has that name."""
        model = get_embedder(embedder or DEFAULT_EMBEDDER)
        config = KBConfig(embedder=model.name, dim=model.dim, chunker=chunker or DEFAULT_CHUNKER)
        get_chunker(config.chunker, model.count_tokens, model.max_tokens)  # validate
        return self.store.create_kb(name, config, tenant)

    def record_path(self, kb: KnowledgeBase) -> KnowledgeBase:
        """``kb`` with the execution path its vectors are made on recorded (the local model's,
        ``embedders/runtimes.py``): at its first ingest, the host's fastest; for one that has
        vectors from before paths were recorded, ONNX Runtime in float32, which made them."""
        if kb.config.embed_path:
            return kb
        path = getattr(get_embedder(kb.config.embedder), "execution_path", None)
        if path is None:  # an embedder with one way to run
            return kb
        if self.store.count_chunks(kb):
            path = REFERENCE_PATH
        return self.store.update_kb(kb.name, replace(kb.config, embed_path=path), kb.tenant_id)

    def ingest(
        self,
        kb: KnowledgeBase,
        paths: Iterable[Path] | Iterable[Document | Skipped],
        progress: Callable[[int], None] | None = None,
        sentences: bool = True,
        chunker: Chunker | None = None,
    ) -> IngestReport:
        """Chunk, embed and store documents; each document in its own transaction.

        With ``sentences`` the vectors of the chunks' sentences are made in the same pass and
        stored beside them (``sentence_vectors.py``), so that questions need not embed them.
        ``chunker``: one of the knowledge base's kind built with other options (a benchmark's
        variant, e.g. ``SectionsChunker(overlap=1)``) instead of the registry's."""
        started = time.perf_counter()
        kb = self.record_path(kb)
        model = embedder_of(kb)
        extractive = is_extractive(kb.config.generator)
        if chunker is None:
            chunker = get_chunker(kb.config.chunker, model.count_tokens, model.max_tokens,
                                  getattr(model, "tokens_add_up", False))
        elif chunker.name != kb.config.chunker:
            raise ConfigError(f"Knowledge base {kb.name!r} is chunked with "
                              f"{kb.config.chunker!r}, not {chunker.name!r}")
        report = IngestReport(embed_path=kb.config.embed_path)
        source = read_all(paths)
        batch: list[tuple[Document, list]] = []
        pending = 0

        def flush() -> None:
            nonlocal pending
            every = [c for _, chunks in batch for c in chunks]
            per_chunk = [sentence_vectors.texts(c, extractive) for c in every] if sentences else None
            vectors, said = sentence_vectors.embed_chunks(model, every, kb.config.embed_headings,
                                                          per_chunk)
            if vectors.shape[1] != kb.config.dim:
                raise DimensionMismatchError(
                    f"{model.name} gave {vectors.shape[1]}-dimensional vectors; knowledge base "
                    f"{kb.name!r} holds {kb.config.dim}-dimensional ones"
                )
            at = 0
            for doc, chunks in batch:
                part = slice(at, at + len(chunks))
                result = self.store.put_document(kb, doc, chunks, vectors[part],
                                                 said[part] if said is not None else None)
                at += len(chunks)
                getattr(report, result).append(doc.id)
                report.chunks += len(chunks) if result != "unchanged" else 0
                if progress:
                    progress(1)
            batch.clear()
            pending = 0

        for item in source:
            if isinstance(item, Skipped):
                report.skipped.append(item)
                continue
            if self.store.document_hash(kb, item.id) == item.content_hash:
                report.unchanged.append(item.id)
                if progress:
                    progress(1)
                continue
            chunks = chunker.chunk(item)
            if not chunks:
                report.skipped.append(Skipped(item.source, "no text to index"))
                continue
            batch.append((item, chunks))
            pending += len(chunks)
            if pending >= EMBED_BATCH_CHUNKS:
                flush()
        if batch:
            flush()
        report.seconds = time.perf_counter() - started
        return report

    # -- ask ------------------------------------------------------------------------------

    @marks
    def retrieve(self, kb: KnowledgeBase, question: str, mode: str = "hybrid",
                 k: int | None = None, vector: np.ndarray | None = None,
                 settings: Retrieval | None = None) -> retrieval.Retrieved:
        """Dense + BM25, fused, then MMR (``mode``), with the knowledge base's retrieval
        settings, or ``settings``, and ``k`` context chunks if given.

        With ``vector`` the question was embedded (in a batch) and checked by the caller: it
        is used as given; otherwise it is checked (``check_question``) and embedded here."""
        settings = settings or kb.config.retrieval
        if k is not None:
            settings = replace(settings, context_k=k)
        if vector is not None:
            return retrieval.retrieve(self.store, kb, vector, question, settings, mode)
        question = check_question(question)
        t = time.perf_counter()
        model = embedder_of(kb)
        qvec = model.embed([question])[0]
        if qvec.shape[0] != kb.config.dim:
            raise DimensionMismatchError(
                f"{model.name} gave a {qvec.shape[0]}-dimensional question vector; knowledge base "
                f"{kb.name!r} holds {kb.config.dim}-dimensional ones. Ask with the embedder it was "
                "built with, or re-embed it with `citewise replay`."
            )
        embed_ms = (time.perf_counter() - t) * 1000
        found = retrieval.retrieve(self.store, kb, qvec, question, settings, mode)
        return replace(found, timings={**found.timings, "embed_ms": embed_ms})

    @marks
    def decide(self, kb: KnowledgeBase, question: str, vector: np.ndarray | None = None,
               settings: Retrieval | None = None, the_gate: gate.Gate | None = None,
               generator: str | None = None,
               read: dict[str, SentenceVectors | None] | None = None,
               answerable: bool | None = None) -> Decided:
        """Retrieve (hybrid), read the gate's signals and decide: what ``ask`` does before any
        generator runs, and what calibration, evaluation and replay measure.

        ``vector`` and ``settings`` as for ``retrieve``; ``the_gate`` defaults to the
        knowledge base's own (``gate.gate_for``); ``generator``, the one that will answer
        when not the knowledge base's, says which sentence vectors the answer path reads;
        ``read``, the sentence rows this question has read already (``for_context``);
        ``answerable``: whether the reader reads the context for the gate's ``answerable``
        signal (None: when the gate's policy needs it). Reading costs ~8 ms a unit on two
        cores, so a gate that does not read it leaves it at 0, and only a refusal has the
        reader read its ``NAMED_UNITS`` closest units, to name the closest passage.
        ``gate_ms`` in the timings is the time from retrieval's end to the decision."""
        with self.store.pinned(kb):  # the version read once for all of this question's reads
            found = self.retrieve(kb, question, vector=vector, settings=settings)
            t = time.perf_counter()
            if the_gate is None:
                the_gate = gate.gate_for(kb.config)[0]
            # the context's sentence vectors stored at ingest, in one read, and the question's
            # from retrieval (under the text it was embedded from); anything else is embedded
            text = " ".join(question.split())  # as ``check_question`` leaves it; empty in a
            asked = {text: found.query_vector} if text else {}  # replay of hashed questions
            model = sentence_vectors.for_context(self.store, kb, embedder_of(kb),
                                                 found.context, asked, generator, read)
            held = self.store.term_counts(kb, absent.words(question), 1)  # any chunk at all?
            # which of the question's terms each candidate holds, as the chunk table keeps them
            # (else the gate stems the candidates)
            stems = (self.store.stem_sets(kb, list(found.keys), signals.pool_terms(question))
                     if found.keys else None)
            measured = signals.measure(found.context, found.candidates, question, model,
                                       found.query_vector, held, stems)
            reader, near = get_reader(kb.config.reads), None
            wanted = the_gate.reads if answerable is None else answerable
            if reader is not None and found.context and wanted:  # the reader reads the closest units
                answers, near = self._read(reader, question, found, model, reading.READ_UNITS)
                measured = replace(measured, answerable=float(answers.max(initial=0.0)))
            decision = the_gate.decide(measured)
            if reader is not None and found.context and not wanted and not decision.answer:
                near = self._read(reader, question, found, model, reading.NAMED_UNITS)[1]
            found = replace(found, timings={**found.timings,
                                            "gate_ms": (time.perf_counter() - t) * 1000})
            return Decided(found, measured, decision, model, near)

    @staticmethod
    def _read(reader: Reader, question: str, found: retrieval.Retrieved, model: Embedder,
              limit: int) -> tuple[np.ndarray, reading.Closest | None]:
        """The reader's P(answers) of the ``limit`` context units closest to the question, and
        the closest of them to answering."""
        units = evidence.context_sentences(found.context)
        answers = reading.unit_readings(reader, question, units,
                                        evidence.sentence_cosines(units, model, found.query_vector), limit)
        return answers, reading.closest(units, answers)

    @marks
    def ask(self, kb: KnowledgeBase, question: str, generator: str | None = None,
            on_stage: Callable[[str, object], None] | None = None,
            history: Sequence[Turn] = (), *, log: bool = True) -> Answer | Refusal:
        """Answer or refuse; the result carries its query log id. ``on_stage`` hears
        ``("retrieved", Retrieved)`` and ``("decision", Decision)`` as they happen.
        ``log=False`` (evaluation, calibration) leaves the query log alone: no id, no token.

        ``history`` is the conversation so far, oldest first: the question is made standalone
        from it before retrieval (``followup.py``; a hosted generator condenses it with the
        model), and the gate and the log read the standalone question. A question with
        several parts is answered for the parts the sources cover, and says which they do
        not (``Answer.uncovered``); if they cover none it is refused."""
        result: Answer | Refusal | None = None
        for event in self._ask(kb, question, generator, False, on_stage, history, log):
            if isinstance(event, streaming.Final):
                result = event.result
        assert result is not None
        return result

    def ask_stream(self, kb: KnowledgeBase, question: str, generator: str | None = None,
                   on_stage: Callable[[str, object], None] | None = None,
                   history: Sequence[Turn] = (),
                   ) -> Iterator[streaming.Sentence | streaming.Final]:
        """``ask``, streamed: checked sentences as the generator writes them, then the result.

        Only sentences that pass the citation check are yielded; the ``Final`` result is the
        one ``ask`` returns for the whole draft (a refusal if nothing held)."""
        return marked_steps(self._ask(kb, question, generator, True, on_stage, history))

    def standalone(self, kb: KnowledgeBase, question: str, history: Sequence[Turn] = (),
                   generator: str | None = None) -> tuple[str, tuple[str, ...]]:
        """The question made standalone from the conversation, and warnings: the generator's
        model condenses it when it can (``condense``), else ``followup.standalone`` does."""
        question, history = check_question(question), check_history(history)
        if not history:
            return question, ()
        try:
            offline = check_question(followup.standalone(question, followup.user_questions(history)))
        except QueryError:  # made too long by its referents: read as asked
            offline = question
        spec = generator or kb.config.generator
        if is_extractive(spec):
            return offline, ()
        model = get_generator(spec, embedder_of(kb))
        if not isinstance(model, CondensingGenerator):
            return offline, ()
        try:
            return check_question(model.condense(question, history)), ()
        except (GenerationError, QueryError) as e:
            why = self._why(e) if isinstance(e, GenerationError) else str(e)
            return offline, (f"The model could not make the follow-up question standalone ({why}); "
                             f"it was read as {offline!r}.",)

    def _parts(self, kb: KnowledgeBase, question: str, the_gate: gate.Gate,
               read: dict[str, SentenceVectors | None] | None = None,
               ) -> list[tuple[Part, Decided]]:
        """Each part of a question with several (``parts.split``), and the gate's decision on
        it alone (the parts embedded in one batch); empty for a question with one part.
        ``read``: the question's sentence rows read so far (``for_context``)."""
        texts = parts.split(question)
        if len(texts) < 2:
            return []
        vectors = embedder_of(kb).embed([check_question(p) for p in texts])
        out = []
        for text, vector in zip(texts, vectors, strict=True):
            decided = self.decide(kb, check_question(text), vector=vector, the_gate=the_gate,
                                  read=read)
            out.append((Part(text, decided.decision), decided))
        return out

    def _ask(self, kb: KnowledgeBase, question: str, generator: str | None, stream: bool,
             on_stage: Callable[[str, object], None] | None, history: Sequence[Turn] = (),
             log: bool = True,
             ) -> Iterator[streaming.Sentence | streaming.Final]:
        started = time.perf_counter()
        the_gate, warnings = gate.gate_for(kb.config)
        question = check_question(question)
        spec = generator or kb.config.generator
        searched, condensed = self.standalone(kb, question, history, spec)
        read: dict[str, SentenceVectors | None] = {}  # each chunk's sentence row, read once
        decided = self.decide(kb, searched, the_gate=the_gate, generator=spec, read=read)
        if not decided.decision.answer and searched != question:
            # a rewrite can go wrong ("is it safe in pregnancy?" after a question about
            # football): the follow-up as asked, if its sources cover it, is answered instead
            as_asked = self.decide(kb, question, the_gate=the_gate, generator=spec, read=read)
            if as_asked.decision.answer:
                searched, decided = question, as_asked
        found, measured, decision = decided.retrieved, decided.signals, decided.decision
        t = time.perf_counter()
        split = self._parts(kb, searched, the_gate, read)
        covered = [(p, d) for p, d in split if p.decision.answer]
        asked = {searched: found.query_vector}  # the question as each vector embedded it
        if split:
            decision = parts.joint(decision, [p for p, _ in covered])
            if covered:
                found = replace(found, context=parts.merged(
                    [d.retrieved.context for _, d in covered], kb.config.retrieval.context_k))
                asked.update({p.question: d.retrieved.query_vector for p, d in covered})
        spent = {"parts_ms": (time.perf_counter() - t) * 1000} if split else {}
        if on_stage:
            on_stage("retrieved", found)
            on_stage("decision", decision)
        result: Answer | Refusal
        drafted_ms: dict[str, float] = {}
        drafted = (" ".join(p.question for p, _ in covered)  # the covered parts, when not all are
                   if decision.answer and split and len(covered) < len(split) else searched)
        gated = drafting.Gated(drafted, found.candidates, found.context, decision,
                               the_gate.related_floor, decided.closest)
        if not decision.answer:
            statement = plain.NO_PART_COVERED if split else plain.NOT_COVERED
            result = drafting.refuse(gated, found.candidates, "gate", statement)
        else:
            base = embedder_of(kb)
            model = decided.sentences  # the context's stored sentence vectors, read by the gate
            if split:  # the covered parts' merged context, with each part's question vector
                model = sentence_vectors.for_context(self.store, kb, base, found.context, asked,
                                                     spec, read)
            chosen = get_generator(spec, model)
            reader = get_reader(kb.config.reads)
            checker = citations.Checker(found.context, model, support.CONTEXT_THRESHOLD
                                        if sentence_vectors.contextual(base) else None, reader)
            result, drafted_ms = yield from drafting.generate(
                gated, chosen, checker, stream and isinstance(chosen, StreamingGenerator),
                self.provider_detail)
        timings = {**found.timings, **spent, **drafted_ms,
                   "total_ms": (time.perf_counter() - started) * 1000}
        result = replace(result, question=question, parts=tuple(p for p, _ in split),
                         timings=timings, standalone=searched if searched != question else "",
                         warnings=(*warnings, *condensed, *result.warnings))
        if isinstance(result, Answer) and result.uncovered:
            result = replace(result, text=f"{result.text} {plain.uncovered(result.uncovered)}")
        if not log:
            yield streaming.Final(result)
            return
        query_id, token = self._log(kb, result, found, measured, spec if decision.answer else None)
        yield streaming.Final(replace(result, query_id=query_id, feedback_token=token))

    def _log(self, kb: KnowledgeBase, result: Answer | Refusal, found: retrieval.Retrieved,
             measured: Signals, generator: str | None) -> tuple[int, str]:
        """Write the question's query-log record (``citewise/telemetry/log.py``); its id and
        the random token that lets whoever got the answer give feedback on it."""
        from citewise.telemetry import log

        record = log.build_record(kb, result, found.candidates, found.context, measured, generator)
        token = log.new_feedback_token()
        return log.write(self.store, kb, record, found.query_vector, token), token
