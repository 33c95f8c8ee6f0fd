"""The name Vigil is installed under (``pip install vigil-agent-loop``, ``pipx install
.``). The command is ``vigil``; the distribution is not, because ``vigil`` on the
public package index is an unrelated project."""

from __future__ import annotations

DISTRIBUTION = "vigil-agent-loop"
POSTGRES_EXTRA = f"{DISTRIBUTION}[postgres]"  # what `pip install` needs for the PostgreSQL store
