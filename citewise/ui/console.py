"""The research console (Streamlit): ask a knowledge base, open the passage behind a citation
in its section, see every retrieved chunk's cosine, BM25 and fused ranks, and the gate's
calibration. Run it with ``citewise console`` (``--db`` or ``CITEWISE_DB`` names the store;
the command hands it over in ``CITEWISE_DB``, so no password is on a command line, and no log
line of the console carries one: ``logmask.py``).

Pages: ``Ask``, ``Calibration``, ``Upload`` (files in as an ingestion job, ``upload_page.py``),
and the passage view that citation links open (``?kb=NAME&chunk=CHUNK_ID``). ``Ask`` keeps
the conversation per knowledge base (a follow-up is made standalone from the questions before
it; "New conversation" starts over), and a refusal's closest topics are buttons that ask
about them. Text from documents (titles, headings, passages, document ids), from questions
and from stored settings is passed to Streamlit through ``esc`` (``text.py``), never as
Markdown or HTML: a heading ``![x](https://...)`` shows as those characters and loads nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from contextlib import closing
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from citewise.answer.followup import MAX_TURN_CHARS, MAX_TURNS
from citewise.answer.gate import gate_for
from citewise.answer.plain import topic_question
from citewise.engine import Engine
from citewise.errors import CitewiseError
from citewise.ingest.units import cells, is_table
from citewise.kb import KnowledgeBase
from citewise.records import Answer, Refusal, Turn
from citewise.search.retrieval import Retrieved
from citewise.stores import DEFAULT_DB, Store, open_store
from citewise.stores.logmask import mask_log_lines
from citewise.ui.text import esc
from citewise.ui.upload_page import console_jobs, upload_page

_TRAILING_MARKERS = re.compile(r"((?:\s*\[\d+(?:\s*,\s*\d+)*\])+)\s*$")


def _table(lines: list[str]) -> str:
    """Table lines (a header, then rows) as a Markdown table of escaped cells; citation
    markers after a row go into its last cell."""
    rows = []
    for line in lines:
        markers = _TRAILING_MARKERS.search(line)
        row = cells(line[: markers.start()] if markers else line)
        if markers:
            row[-1] = f"{row[-1]} {markers.group(1).strip()}"
        rows.append("| " + " | ".join(esc(c) for c in row) + " |")
    width = len(cells(lines[0]))
    return "\n".join([rows[0], "|" + " --- |" * width, *rows[1:]])


def rendered(text: str) -> str:
    """An answer or a quote as Markdown: its text escaped (``esc``), its tables as tables."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.strip().splitlines()
        if lines:
            out.append(_table(lines) if all(is_table(ln) for ln in lines) else esc(block.strip()))
    return "\n\n".join(out)


def store_url() -> str:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db", default=os.environ.get("CITEWISE_DB", DEFAULT_DB))
    return parser.parse_known_args(sys.argv[1:])[0].db


def passage_link(kb: str, chunk_id: str) -> str:
    return "?" + urlencode({"kb": kb, "chunk": chunk_id})


def chunk_table(found: Retrieved, kb: str) -> pd.DataFrame:
    """Every fused candidate with its ranks; ``context`` marks those that reached the answer."""
    in_context = {c.chunk.id for c in found.context}
    by_cosine = {c.chunk.id: r for r, c in enumerate(sorted(found.candidates, key=lambda c: -c.cosine), 1)}
    rows = [
        {"fused rank": rank, "cosine": round(c.cosine, 4), "cosine rank": by_cosine[c.chunk.id],
         "dense rank": c.dense_rank or None, "BM25": round(c.bm25, 3), "BM25 rank": c.bm25_rank or None,
         "RRF": round(c.rrf, 5), "in context": c.chunk.id in in_context, "document": c.chunk.doc_id,
         "section": c.chunk.heading, "passage": passage_link(kb, c.chunk.id)}
        for rank, c in enumerate(found.candidates, 1)
    ]
    return pd.DataFrame(rows)


def show_answer(result: Answer, kb: str) -> None:
    text = rendered(result.text)
    for c in result.citations:
        text = text.replace(esc(f"[{c.n}]"), f"[\\[{c.n}\\]]({passage_link(kb, c.chunk_id)})")
    st.markdown(text)
    st.markdown("**Sources**")
    for c in result.citations:  # each with the part of its passage it quotes
        quote = "\n".join(f"> {line}" for line in rendered(c.quote).splitlines())
        st.markdown(f"[\\[{c.n}\\] {esc(c.doc_id)} › {esc(c.section)}]({passage_link(kb, c.chunk_id)})"
                    f"\n\n{quote}")
    for dropped in result.dropped:
        st.caption(f"Dropped by the citation check: {esc(dropped.sentence)} ({esc(dropped.reason)})")


def show_refusal(result: Refusal, key: str = "latest") -> None:
    """The plain reason, and the closest topics as buttons that ask about them."""
    st.warning(esc(result.reason))
    if result.related:
        st.markdown("**Ask about a related topic instead**")
        for n, topic in enumerate(result.related):
            st.button(esc(topic), key=f"topic-{key}-{n}", on_click=_queue,
                      args=(topic_question(topic),))


def _queue(question: str) -> None:
    st.session_state["queued"] = question


def _conversation(kb: str) -> list[dict[str, Any]]:
    """This session's turns with ``kb``: ``{"question", "result"}``, oldest first."""
    return st.session_state.setdefault("conversations", {}).setdefault(kb, [])


def _history(turns: list[dict[str, Any]]) -> list[Turn]:
    history: list[Turn] = []
    for t in turns:
        r = t["result"]
        reply = r.text if isinstance(r, Answer) else r.reason
        history += [Turn("user", t["question"][:MAX_TURN_CHARS]),
                    Turn("assistant", reply[:MAX_TURN_CHARS])]
    return history[-MAX_TURNS:]


def _new_conversation(kb: str) -> None:
    st.session_state.setdefault("conversations", {})[kb] = []


def show_result(result: Answer | Refusal, kb: str, key: str) -> None:
    if result.standalone:
        st.caption(f"read as: {esc(result.standalone)}")
    for warning in result.warnings:
        st.caption(f"⚠ {esc(warning)}")
    d = result.decision
    st.caption(f"gate {d.policy}: signal {d.signal:.3f} vs threshold {d.threshold:.3f} · "
               f"query log #{result.query_id} · {result.timings.get('total_ms', 0):.0f} ms")
    if isinstance(result, Answer):
        show_answer(result, kb)
    else:
        show_refusal(result, key)


def ask_page(engine: Engine, kb: KnowledgeBase) -> None:
    st.header(f"Ask {kb.name}")
    with st.form("ask", clear_on_submit=True):
        question = st.text_input("Question", key="question")
        asked = st.form_submit_button("Ask")
    turns = _conversation(kb.name)
    queued = st.session_state.pop("queued", None)
    if queued or (asked and question.strip()):
        stages: dict[str, Any] = {}
        text = queued or question
        try:
            result = engine.ask(kb, text, on_stage=stages.__setitem__, history=_history(turns))
        except CitewiseError as e:
            st.error(esc(str(e)))
            return
        turns.append({"question": text, "result": result, "found": stages["retrieved"]})
    if not turns:
        return
    latest = turns[-1]
    st.markdown(f"**{esc(latest['question'])}**")
    show_result(latest["result"], kb.name, f"{len(turns)}")
    if len(turns) > 1:
        st.subheader("Earlier in this conversation")
        for n, t in reversed(list(enumerate(turns[:-1], 1))):
            with st.expander(esc(t["question"])):
                show_result(t["result"], kb.name, str(n))
    st.button("New conversation", key="new-conversation", on_click=_new_conversation,
              args=(kb.name,))
    st.subheader("Retrieved chunks")
    st.dataframe(chunk_table(latest["found"], kb.name), hide_index=True,
                 column_config={"passage": st.column_config.LinkColumn("passage", display_text="open")})


def passage_page(store: Store, kb_name: str, chunk_id: str) -> None:
    """The cited passage inside its section: the section's passages in order, this one marked."""
    try:
        kb = store.get_kb(kb_name)
    except CitewiseError as e:
        st.error(esc(str(e)))
        return
    chunk = store.chunk_by_id(kb, chunk_id)
    if chunk is None:
        st.error(f"No passage {esc(chunk_id)} in knowledge base {esc(kb_name)}.")
        return
    st.header(esc(chunk.title or chunk.doc_id))
    st.caption(" › ".join(esc(part) for part in (kb_name, chunk.doc_id, chunk.heading))
               + f" · passage {esc(chunk.id)}")
    keys = [int(k) for k in store.dense_index(kb).keys]
    section = sorted((c for c in store.chunks(kb, keys).values()
                      if c.doc_id == chunk.doc_id and c.section == chunk.section),
                     key=lambda c: c.ordinal)
    st.subheader(" › ".join(esc(part) for part in chunk.section) or "(no heading)")
    for c in section:
        if c.id == chunk.id:
            st.info(esc(c.text))
        else:
            st.markdown(esc(c.text))


def calibration_page(kb: KnowledgeBase) -> None:
    st.header(f"Gate calibration of {kb.name}")
    the_gate, warnings = gate_for(kb.config)
    setting = kb.config.gate
    st.metric(f"gate in use: {the_gate.policy}", f"{the_gate.threshold:.3f}")
    for w in warnings:
        st.caption(f"⚠ {esc(w)}")
    if setting is None or setting.source != "calibrated" or warnings:
        st.info("This knowledge base is uncalibrated: the gate uses the shipped default for its "
                "embedder. Run `citewise calibrate --kb NAME LABELLED.jsonl` to set its threshold "
                "from labelled questions; the results show here.")
        return
    details = setting.details
    st.caption(f"calibrated {esc(str(details.get('calibrated_at', '?')))} on "
               f"{esc(str(details.get('queries', '?')))} questions "
               f"{esc(str(details.get('file', '')))}; at most "
               f"{details.get('max_covered_refusal', '?')} of covered questions refused")
    buckets = details.get("buckets") or []
    if buckets:
        frame = pd.DataFrame(buckets)
        st.subheader("Refusal rate per bucket (95% Clopper-Pearson interval)")
        st.dataframe(frame, hide_index=True)
        if {"bucket", "rate", "low", "high"} <= set(frame.columns):
            import altair as alt

            base = alt.Chart(frame).encode(x=alt.X("bucket:N", sort=None, title="bucket"))
            bars = base.mark_bar().encode(y=alt.Y("rate:Q", scale=alt.Scale(domain=[0, 1]),
                                                  title="refused at the threshold"))
            st.altair_chart(bars + base.mark_rule().encode(y="low:Q", y2="high:Q"))
    compared = details.get("compared")
    if compared:
        st.subheader("Thresholds of the policies compared")
        st.dataframe(pd.DataFrame({"policy": list(compared), "threshold": list(compared.values())}),
                     hide_index=True)
    plot = details.get("plot")
    if plot and os.path.exists(str(plot)):
        st.image(str(plot), caption="Refusal rate against threshold per bucket")


def main() -> None:
    mask_log_lines()
    st.set_page_config(page_title="citewise console", layout="wide")
    url = store_url()
    with closing(open_store(url)) as store:
        params = st.query_params
        if params.get("chunk") and params.get("kb"):
            passage_page(store, params["kb"], params["chunk"])
            return
        jobs = console_jobs(url)  # resumes the jobs a stopped console left
        page = st.sidebar.radio("Page", ["Ask", "Calibration", "Upload"], key="page")
        kbs = store.list_kbs()
        if page == "Upload":
            upload_page(store, kbs, url, jobs)
            return
        if not kbs:
            st.info("No knowledge bases yet; create one on the Upload page, or with "
                    "`citewise ingest --kb NAME PATH`.")
            return
        names = [kb.name for kb in kbs]
        chosen = st.sidebar.selectbox("Knowledge base", names, key="kb")
        kb = kbs[names.index(chosen)]
        st.sidebar.caption(f"{store.count_chunks(kb)} chunks · {kb.config.embedder}")
        if page == "Ask":
            ask_page(Engine(store), kb)
        else:
            calibration_page(kb)


main()
