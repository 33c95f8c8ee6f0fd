"""The environment Vigil gives the programs it starts: small and explicit.

The daemon's own environment may hold secrets meant for other programs (a database
password, another tool's API key). A program Vigil starts gets only what it needs
to run: ``BASE_NAMES`` (PATH, HOME, locale, TMPDIR), the proxy and CA-bundle
variables (``NETWORK_VARIABLES``: it may fetch), and the names its configuration
lists (``pass_env``). The agent's is built on this by ``dispatch.environment``;
the alert hook's (``[alerts] pass_env``) and a command sensor's (its entry's
``pass_env``) are this and their own ``VIGIL_*`` variables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

BASE_NAMES = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

NETWORK_VARIABLES = (
    *(name for proxy in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY") for name in (proxy, proxy.lower())),
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
)


def explicit_env(source: Mapping[str, str], pass_env: Iterable[str] = ()) -> dict[str, str]:
    """``BASE_NAMES``, ``NETWORK_VARIABLES`` and ``pass_env`` as set in ``source``
    (a name that is not set there is left out, not set to empty); PATH always, a
    UTF-8 locale unless one is set."""
    env = {name: source[name] for name in (*BASE_NAMES, *NETWORK_VARIABLES, *pass_env) if name in source}
    env.setdefault("PATH", DEFAULT_PATH)
    env.setdefault("LANG", "C.UTF-8")
    return env
