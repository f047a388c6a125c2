"""Record sentence-transformers' vectors for the local model, once, for the torch-free path to
reproduce. Needs the ``[torch]`` extra (torch, sentence-transformers); nothing else does:

    pip install -e ".[torch]" && python tests/data/record_references.py

Writes ``tests/data/minilm_references.npz`` (the texts, their vectors as citewise embeds them:
a text longer than the model reads is split by ``LocalEmbedder.pieces`` and its pieces'
vectors averaged, and the token states of a few short texts) and the probe vectors a freshly
built graph is checked against, ``citewise/embedders/probes.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from citewise.embedders.base import mean_of_pieces, split_all
from citewise.embedders.local import LocalEmbedder

HERE = Path(__file__).resolve().parent
OUT = HERE / "minilm_references.npz"
PROBES_OUT = HERE.parent.parent / "citewise" / "embedders" / "probes.json"

PROBES = [
    "How is varenicline dosed?",
    "0-dimensional biomaterials show inductive properties.",
    "A text of a few more words, so that a batch of probes is padded on the right side.",
    "",
]
LONG_A = " ".join(
    f"Sentence {i} says that nicotine withdrawal peaks on day {i % 7 + 1} and fades after week {i % 4 + 2}."
    for i in range(40)
)
LONG_B = ("The launch of the rocket was delayed by weather. " * 25
          + "Varenicline doubled the quit rate at one year compared with placebo. " * 25)
LONG_C = "word " * 600  # one overlong sentence, cut by words
TEXTS = [
    *PROBES,
    "nicotine patch dose",
    "nicotine replacement patch dosing",
    "tax law",
    "Does bupropion lower the seizure threshold in patients with a history of eating disorders?",
    "Withdrawal symptoms: irritability, anxiety, difficulty concentrating, increased appetite.",
    "E-cigarettes (ENDS) vs. NRT — 18.0% vs 9.9% abstinence at 52 weeks (RR 1.83; 95% CI 1.30-2.58).",
    "Café, naïve, résumé, Zürich, São Paulo.",
    "Ο καπνός βλάπτει σοβαρά την υγεία.",
    "吸烟有害健康。戒烟可以降低患肺癌的风险。",
    "التدخين ضار بالصحة",
    "Emoji 🚭🙂 and symbols ≥ ≤ ± µg/mL.",
    "   ",
    "\n\nA line after blank lines.\n",
    "UPPER CASE AND lower case are the same to an uncased model.",
    "a",
    "?",
    "1 2 3 4 5 6 7 8 9 10",
    "https://example.org/path?q=1&r=2 is a link, user@example.org an address.",
    "The quick brown fox jumps over the lazy dog.",
    "Smoking cessation before surgery reduces postoperative complications.",
    "Cytisine is a partial agonist of the α4β2 nicotinic acetylcholine receptor.",
    "Counselling plus pharmacotherapy beats either alone.",
    "What is the best way to bake sourdough bread?",
    "How long do nicotine withdrawal symptoms last?",
    LONG_A,
    LONG_B,
    LONG_C,
    " ".join([LONG_A, LONG_B]),
]
TOKEN_TEXTS = PROBES[:3] + ["Café, naïve, résumé, Zürich, São Paulo."]


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    local = LocalEmbedder()  # the tokenizer and the pieces only; no graph is built
    st = SentenceTransformer(str(local.path), device="cpu", local_files_only=True)
    st.max_seq_length = local.max_len
    pieces, owner = split_all(TEXTS, local.pieces)
    raw = st.encode(pieces, convert_to_numpy=True, normalize_embeddings=True, batch_size=1)
    vectors = mean_of_pieces(raw, owner, len(TEXTS), local.name)
    tokens = [st.encode([t], output_value="token_embeddings")[0].numpy() for t in TOKEN_TEXTS]
    np.savez_compressed(
        OUT, texts=np.array(TEXTS), vectors=vectors.astype(np.float32),
        token_texts=np.array(TOKEN_TEXTS),
        **{f"tokens_{i}": t.astype(np.float32) for i, t in enumerate(tokens)},
    )
    probe_vectors = st.encode(PROBES, convert_to_numpy=True, normalize_embeddings=True, batch_size=1)
    PROBES_OUT.write_text(json.dumps({local.model: {
        "recorded_with": "sentence-transformers, tests/data/record_references.py",
        "texts": PROBES, "vectors": [[round(float(x), 7) for x in row] for row in probe_vectors],
    }}) + "\n")
    print(f"{len(TEXTS)} texts ({len(pieces)} pieces) -> {OUT}; {len(PROBES)} probes -> {PROBES_OUT}")


if __name__ == "__main__":
    main()
