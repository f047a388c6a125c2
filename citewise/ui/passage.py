"""How the console shows text from documents: an answer or a quote (``rendered``: its text
escaped, its tables as tables), and a cited passage inside its section, in a dialog over the
conversation (``passage_dialog``), read from the store only when it is opened."""

from __future__ import annotations

import re

import streamlit as st

from citewise.ingest.units import cells, is_table
from citewise.kb import KnowledgeBase
from citewise.records import Chunk
from citewise.stores.roles import Search
from citewise.ui.text import esc

_TRAILING_MARKERS = re.compile(r"((?:\s*\[\d+(?:\s*,\s*\d+)*\])+)\s*$")
AROUND = 3  # passages of the section shown before and after the cited one


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


def section_of(store: Search, kb: KnowledgeBase, chunk: Chunk) -> list[Chunk]:
    """The passages of ``chunk``'s section of its document, in their order."""
    return [c for c in store.document_chunks(kb, chunk.doc_id) if c.section == chunk.section] or [chunk]


def open_passage(kb: str, chunk_id: str, n: int) -> None:
    """A source's button: the next run opens its passage (``show_opened``)."""
    st.session_state["open-passage"] = (kb, chunk_id, n)


def show_opened(store: Search, kb: KnowledgeBase) -> None:
    """The dialog of the source clicked in the run before, if one was; once: any other run
    of the page closes it."""
    opened = st.session_state.pop("open-passage", None)
    if opened and opened[0] == kb.name:
        passage_dialog(store, kb, opened[1], opened[2])


def passage_dialog(store: Search, kb: KnowledgeBase, chunk_id: str, n: int) -> None:
    """Source ``n`` in a dialog: its document's title, then its section with the passages
    around it, the cited one marked; the conversation stays under it."""
    chunk = store.chunk_by_id(kb, chunk_id)
    title = esc(chunk.title or chunk.doc_id) if chunk else "Passage not found"
    st.dialog(f"[{n}] {title}", width="large")(_section)(store, kb, chunk, chunk_id)


def _section(store: Search, kb: KnowledgeBase, chunk: Chunk | None, chunk_id: str) -> None:
    if chunk is None:  # the document was replaced or deleted since the answer
        st.error(f"No passage {esc(chunk_id)} in knowledge base {esc(kb.name)} any more; "
                 "its document has changed since the answer. Ask again.")
        return
    section = section_of(store, kb, chunk)
    at = next((i for i, c in enumerate(section) if c.id == chunk.id), 0)
    st.caption(f"{esc(chunk.doc_id)} · passage {at + 1} of {len(section)} in this section")
    st.subheader(" › ".join(esc(part) for part in chunk.section) or "(no heading)")
    first, last = max(0, at - AROUND), min(len(section), at + AROUND + 1)
    if first:
        st.caption(f"… {first} earlier passage{'s' if first > 1 else ''} of this section")
    for c in section[first:last]:
        if c.id == chunk.id:
            st.info(rendered(c.text), icon=":material/format_quote:")
        else:
            st.markdown(rendered(c.text))
    if last < len(section):
        more = len(section) - last
        st.caption(f"… {more} later passage{'s' if more > 1 else ''} of this section")
