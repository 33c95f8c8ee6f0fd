"""The environment an agent process gets: small and explicit.

The daemon's own environment may hold secrets meant for other programs; the agent
gets only what it needs to run (PATH, HOME, locale, TMPDIR), the three ``VIGIL_*``
variables that tell it where it is and which task it works on (and
``VIGIL_STORE_URL`` when the loop's store comes from it), its own CLI's variables
(``vigil.agent_clis``: credentials, endpoint, config folder, the CLI's own switches;
the cloud variables of Bedrock or Vertex only when the switch that uses them is
set), the proxy and CA-bundle variables (``NETWORK_VARIABLES``), and the names an
operator lists in ``[dispatch] pass_env``. The ``claude`` executor's process never
sees ``OPENAI_API_KEY`` and the ``codex`` one never sees ``ANTHROPIC_API_KEY``.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from vigil.agent_clis import CLI_FACTS
from vigil.config import STORE_URL_ENV, Settings
from vigil.environment import BASE_NAMES, DEFAULT_PATH, NETWORK_VARIABLES

__all__ = ["BASE_NAMES", "DEFAULT_PATH", "NETWORK_VARIABLES", "agent_env", "base_env", "with_run_ids"]


@functools.cache
def _vigil_scripts() -> str | None:
    """This installation's script folder when ``vigil`` lives there, else None.
    Looked up once per process: it is the interpreter's own folder."""
    scripts = Path(sys.executable).parent
    return str(scripts) if (scripts / "vigil").exists() else None


def _path_with_vigil(path: str) -> str:
    """PATH with this installation's script folder in front, when ``vigil`` lives
    there: the agent's ``vigil task close`` must reach the same install as the
    daemon even when its virtualenv was never activated."""
    scripts = _vigil_scripts()
    if scripts is None:
        return path
    parts = path.split(os.pathsep) if path else []
    if scripts in parts:
        return path
    return os.pathsep.join([scripts, *parts])


def agent_env(
    settings: Settings,
    task_id: int,
    run_id: int,
    *,
    source: Mapping[str, str] | None = None,
    executor: str | None = None,
) -> dict[str, str]:
    """The complete environment for one run's process: ``base_env`` and the ids.

    ``source`` is the environment to pick from (default: this process's).
    """
    return with_run_ids(base_env(settings, source=source, executor=executor), task_id, run_id)


def base_env(
    settings: Settings, *, source: Mapping[str, str] | None = None, executor: str | None = None
) -> dict[str, str]:
    """Everything of a run's environment but the task and run ids: the same for
    every run of one dispatcher and executor. ``executor`` (``claude``, ``codex``;
    None or another: none) says whose CLI variables to pass. A name in ``pass_env``
    that is not set in ``source`` (default: this process's environment) is left out,
    not set to empty.
    """
    origin = os.environ if source is None else source
    env = {name: origin[name] for name in BASE_NAMES if name in origin}
    cli = CLI_FACTS.get(executor or "")
    if cli is not None:
        env.update(cli.variables.pick(origin))
        env.update({name: origin[name] for name in NETWORK_VARIABLES if name in origin})
    env["PATH"] = _path_with_vigil(env.get("PATH", DEFAULT_PATH))
    # a UTF-8 locale keeps agent CLIs from mangling non-ASCII task text
    env.setdefault("LANG", "C.UTF-8")
    for name in settings.dispatch.pass_env:
        if name in origin:
            env[name] = origin[name]
    if origin.get(STORE_URL_ENV):
        # the agent's own `vigil task …` calls must reach the store the loop uses,
        # not the home's SQLite file
        env[STORE_URL_ENV] = origin[STORE_URL_ENV]
    env["VIGIL_HOME"] = str(settings.home)
    return env


def with_run_ids(base: Mapping[str, str], task_id: int, run_id: int) -> dict[str, str]:
    """A copy of ``base`` that names the task and the run the process works on."""
    return {**base, "VIGIL_TASK_ID": str(task_id), "VIGIL_RUN_ID": str(run_id)}
