"""The agent CLIs Vigil runs: one folder each (``claude/``, ``codex/``) and what they share."""
