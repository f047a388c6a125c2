"""Train citewise's reading model: a cross-encoder that says whether a passage answers a
question, and whether it supports or contradicts a claim. ``make reader`` runs it."""
