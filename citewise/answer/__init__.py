"""The answer path after search: the gate, drafting, the citation check, follow-ups and parts."""
