"""Claude Code: its executor, stream, sandbox and doctor checks."""
