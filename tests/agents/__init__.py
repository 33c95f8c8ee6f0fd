"""Tests that run the real agent CLIs (Claude Code, Codex) against a local model server."""
