"""The research console (Streamlit): ask a knowledge base as in a chat, open the passage
behind a citation in its section without leaving the conversation, see every retrieved chunk's
scores in plain words, and the gate's calibration. Run it with ``citewise console`` (``--db`` or
``CITEWISE_DB`` names the store; the command hands it over in ``CITEWISE_DB``, so no password is
on a command line, and no log line of the console carries one: ``logmask.py``).

Pages: ``Ask`` (``ask_page.py``), ``Calibration``, ``Upload`` (files in as an ingestion job,
``upload_page.py``). The knowledge base picked (``"kb-chosen"`` in the session) stays picked
from page to page, the Upload page's too. Text from documents (titles, headings, passages,
document ids), from questions and from stored settings is passed to Streamlit through ``esc``
(``text.py``), never as Markdown or HTML: a heading ``![x](https://...)`` shows as those
characters and loads nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import closing

import pandas as pd
import streamlit as st

from citewise.answer.gate import gate_for
from citewise.engine import Engine
from citewise.kb import KnowledgeBase
from citewise.stores import DEFAULT_DB, open_store
from citewise.stores.logmask import mask_log_lines
from citewise.ui.ask_page import ask_page
from citewise.ui.text import esc
from citewise.ui.upload_page import CHOSEN, console_jobs, upload_page


def store_url() -> str:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db", default=os.environ.get("CITEWISE_DB", DEFAULT_DB))
    return parser.parse_known_args(sys.argv[1:])[0].db


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
        chosen = st.session_state.get(CHOSEN)  # kept while a page without this list shows
        chosen = st.sidebar.selectbox("Knowledge base", names, key="kb",
                                      index=names.index(chosen) if chosen in names else 0)
        st.session_state[CHOSEN] = chosen
        kb = kbs[names.index(chosen)]
        st.sidebar.caption(f"{store.count_chunks(kb)} chunks · {kb.config.embedder}")
        if page == "Ask":
            ask_page(Engine(store), kb)
        else:
            calibration_page(kb)


main()
