"""Codex: its executor, stream, rollout, usage and doctor checks."""
