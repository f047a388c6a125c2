"""Search: a question's candidate chunks, by keywords and vectors, fused."""
