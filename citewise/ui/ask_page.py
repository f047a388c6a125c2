"""The console's Ask page: a conversation with one knowledge base, read as a chat (the oldest
turn first, the newest at the bottom above the question box). An answer's sources are buttons
that open the passage in its section over the conversation (``passage.py``); a refusal's
closest topics are buttons that ask about them; each turn keeps the chunks retrieval found,
in a table of plain words. A follow-up is made standalone from the turns before it; "New
conversation" starts over."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from citewise.answer.followup import MAX_TURN_CHARS, MAX_TURNS
from citewise.answer.plain import topic_question
from citewise.engine import Engine
from citewise.errors import CitewiseError
from citewise.kb import KnowledgeBase
from citewise.records import Answer, Refusal, Turn
from citewise.search.retrieval import Retrieved
from citewise.ui.passage import open_passage, rendered, show_opened
from citewise.ui.text import esc

NONE = "—"  # a score a chunk did not get, as the table shows it
COLUMNS = {  # the retrieved-chunks table's columns: what each means, and its width in pixels
    "order": ("The order retrieval ranked the chunk in (both searches fused).", 55),
    "document": ("The document's title.", 170),
    "section": ("The section the chunk is in.", 170),
    "meaning match": ("How close the chunk's meaning is to the question's (cosine of their "
                      "vectors, -1 to 1); the refusal gate reads these.", 105),
    "word match": ("How well the chunk matches the question's words (BM25 score); — when the "
                   "keyword search did not find it.", 90),
    "in the answer": ("Whether the answer cites this chunk.", 100),
    "passage": ("The chunk's first words.", 320),
}
# the sources' buttons read as a list of links: their labels from the left, not centred
STYLE = ('<style>div[class*="st-key-cite-"] button {justify-content: flex-start; '
         'text-align: left;}</style>')


def chunk_table(found: Retrieved, cited: set[str]) -> pd.DataFrame:
    """Every retrieved chunk in the order retrieval ranked them, in words a reader knows."""
    rows = [
        {"order": rank, "document": c.chunk.title or c.chunk.doc_id,
         "section": " › ".join(c.chunk.section) or "(no heading)", "meaning match": f"{c.cosine:.3f}",
         "word match": f"{c.bm25:.2f}" if c.bm25_rank else NONE,
         "in the answer": "yes" if c.chunk.id in cited else "no",
         "passage": " ".join(c.chunk.text.split())[:120]}
        for rank, c in enumerate(found.candidates, 1)
    ]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def show_chunks(found: Retrieved, result: Answer | Refusal, key: str) -> None:
    cited = {c.chunk_id for c in result.citations} if isinstance(result, Answer) else set()
    with st.expander(f"Retrieved chunks ({len(found.candidates)})", key=f"chunks-{key}"):
        st.dataframe(chunk_table(found, cited), hide_index=True,
                     column_config={name: st.column_config.Column(name, help=text, width=width)
                                    for name, (text, width) in COLUMNS.items()})


def show_answer(result: Answer, kb: str, key: str) -> None:
    st.markdown(rendered(result.text))
    st.markdown("**Sources**")
    for c in result.citations:  # each a button opening its passage, with what it quotes
        where = [c.title or c.doc_id] + ([c.section] if c.section != c.title else [])
        with st.container(gap=None):  # the quote right under its source
            st.button(f"\\[{c.n}\\] " + " › ".join(esc(part) for part in where),
                      key=f"cite-{key}-{c.n}", type="tertiary", icon=":material/article:",
                      help="Open the passage in its section", on_click=open_passage,
                      args=(kb, c.chunk_id, c.n))
            st.markdown("\n".join(f"> {line}" for line in rendered(c.quote).splitlines()))
    for dropped in result.dropped:
        st.caption(f"Dropped by the citation check: {esc(dropped.sentence)} ({esc(dropped.reason)})")


def show_refusal(result: Refusal, key: str) -> None:
    """The plain reason, and the closest topics as buttons that ask about them."""
    st.warning(esc(result.reason))
    if result.related:
        st.markdown("**Ask about a related topic instead**")
        for n, topic in enumerate(result.related):
            st.button(esc(topic), key=f"topic-{key}-{n}", on_click=_queue,
                      args=(topic_question(topic),))


def show_result(result: Answer | Refusal, kb: str, key: str) -> None:
    if result.standalone:
        st.caption(f"read as: {esc(result.standalone)}")
    for warning in result.warnings:
        st.caption(f"⚠ {esc(warning)}")
    if isinstance(result, Answer):
        show_answer(result, kb, key)
    else:
        show_refusal(result, key)
    d = result.decision
    st.caption(f"gate {d.policy}: signal {d.signal:.3f} vs threshold {d.threshold:.3f} · "
               f"query log #{result.query_id} · {result.timings.get('total_ms', 0):.0f} ms")


def _queue(question: str) -> None:
    st.session_state["queued"] = question


def _conversation(kb: str) -> list[dict[str, Any]]:
    """This session's turns with ``kb``: ``{"question", "result", "found"}``, oldest first."""
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


def show_turn(turn: dict[str, Any], kb: str, key: str) -> None:
    with st.chat_message("user"):
        st.markdown(esc(turn["question"]))
    with st.chat_message("assistant"):
        show_result(turn["result"], kb, key)
        show_chunks(turn["found"], turn["result"], key)


def ask_page(engine: Engine, kb: KnowledgeBase) -> None:
    st.html(STYLE)
    st.header(f"Ask {kb.name}")
    turns = _conversation(kb.name)
    question = st.chat_input(f"Ask {kb.name} a question", key="question")
    text = st.session_state.pop("queued", None) or (question or "").strip()
    if not turns and not text:
        st.caption("Ask a question below. Answers cite the passages they come from: open a "
                   "source to read it in its section. Follow-ups are read with the questions "
                   "before them.")
    for n, turn in enumerate(turns, 1):
        show_turn(turn, kb.name, str(n))
    if text:
        with st.chat_message("user"):
            st.markdown(esc(text))
        with st.chat_message("assistant"):
            stages: dict[str, Any] = {}
            try:
                with st.spinner("Searching the sources…"):
                    result = engine.ask(kb, text, on_stage=stages.__setitem__,
                                        history=_history(turns))
            except CitewiseError as e:
                st.error(esc(str(e)))
            else:
                turns.append({"question": text, "result": result, "found": stages["retrieved"]})
                show_result(result, kb.name, str(len(turns)))
                show_chunks(stages["retrieved"], result, str(len(turns)))
    if turns:
        st.button("New conversation", key="new-conversation", icon=":material/restart_alt:",
                  on_click=_new_conversation, args=(kb.name,))
    show_opened(engine.store, kb)
