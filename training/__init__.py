"""Training code for citewise's own models; not part of the installed package."""
