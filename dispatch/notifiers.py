"""Alerts to people's notification services: ``[alerts] notify``, through apprise.

Each URL (``ntfy://…``, ``tgram://…``, ``mailto://…``, ``json://…``: any service
apprise knows) gets the alerts of its kinds (``vigil.config.NOTIFY_KINDS``; by
default waiting, failed, gated and over budget), as a title (the event's message)
and a body that says what happened and how to answer or act (a gate a person must
lift: its ``fix``; a hold that ends by itself: that there is nothing to do). The URLs of one event
are sent to at once, each by a child process of its own, all within one deadline,
``[alerts] timeout``: a service that is down, refuses or hangs is logged and never
raised, so the loop goes on. A child still sending at the deadline, or when the
daemon stops (``AlertHook.drain``), is killed: a service that accepts and never
answers, or trickles a byte every few seconds (which resets every socket timeout),
cannot hold the process.

With a store, the outcome per URL is kept in ``loop_state`` (``NOTIFY_KEY``: the
URL's position, its scheme, when it last succeeded and failed, the last error), so
``vigil status`` and ``vigil doctor`` can say that a service is failing. A URL is
never shown whole: its user, password or token may be in it.

apprise is imported by the child only: the daemon never loads it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from vigil.config import NotifyTarget
from vigil.models import NOTIFY_KEY
from vigil.store import Store

log = logging.getLogger("vigil.alerts")


@dataclass(frozen=True, slots=True)
class Sent:
    """How sending one alert to the URL at ``position`` (in ``notify``) went."""

    position: int
    service: str  # "json://…": the URL's scheme only
    ok: bool
    error: str | None = None


def service_name(url: str) -> str:
    """The URL as it may be shown: its scheme only (``tgram://…``)."""
    return url.split("://", 1)[0] + "://…"


def body_of(event: Mapping[str, object]) -> str:
    """What a notification says: the event's message, then how to act on it."""
    lines = [str(event.get("message", ""))]
    if event.get("event") == "task_waiting":
        choices = event.get("choices")
        if isinstance(choices, list) and choices:
            lines.append("Choices: " + "; ".join(f"{n}. {c}" for n, c in enumerate(choices, start=1)))
        lines.append(f"Answer with: {event.get('answer_with')}, or from the dashboard (vigil tui, key w).")
    elif event.get("event") in ("task_failed", "task_denied"):
        lines.append(f"See: vigil task show {event.get('task_id')}")
    elif event.get("fix"):  # a gate a person must lift, a fallback that cannot start
        lines.append(f"To do: {event.get('fix')}")
    elif event.get("event") == "gate_changed":  # a hold that ends by itself: nothing to do
        lines.append("Nothing to do: it ends by itself. See: vigil status")
    link = event.get("link")
    if link:
        lines.append(f"Open it in the dashboard: {link}")
    home = event.get("home")
    if home:
        lines.append(f"(home {home})")
    return "\n".join(lines)


def _send_one(url: str, title: str, body: str) -> str | None:
    """Send one notification (blocking); None when apprise says it went, else why not."""
    with warnings.catch_warnings():
        # apprise 2.x uses the stdlib's imghdr, deprecated since Python 3.11: its concern, not an alert's
        warnings.simplefilter("ignore", DeprecationWarning)
        import apprise

        notifier = apprise.Apprise()
        if not notifier.add(url):
            return "apprise does not understand this URL"
        sent = notifier.notify(title=title, body=body)
    return None if sent else "the service did not accept it (see the log)"


async def _send_in_child(url: str, title: str, body: str, timeout_s: float) -> str | None:
    """``_send_one`` in a child process (``python -m dispatch.notifiers``), killed at
    ``timeout_s`` or when the caller gives up (cancellation); None when it went, else
    why not. A child, not a thread: apprise sends from threads of its own pool, which
    the interpreter joins at exit however long a service holds them."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dispatch.notifiers",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # a stop signal to the daemon's group is the daemon's to handle
    )
    request = json.dumps({"url": url, "title": title, "body": body}).encode()  # on stdin: no URL in ps
    try:
        out, err = await asyncio.wait_for(proc.communicate(request), timeout_s)
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if proc.returncode != 0:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return f"the sender failed: {last[0]}"
    answer = json.loads(out)
    return None if answer is None else str(answer)


class Notifiers:
    """The configured notification services; ``send`` never raises."""

    def __init__(self, targets: tuple[NotifyTarget, ...], timeout_s: float, store: Store | None = None) -> None:
        self.targets = targets
        self._timeout_s = timeout_s
        self._store = store

    async def send(self, event: Mapping[str, object]) -> list[Sent]:
        """Send ``event`` to every URL that wants its kind, all at once, within one
        deadline (the timeout) in all; how each went (recorded in the store, when
        there is one)."""
        kind = str(event.get("event"))
        title = f"vigil: {event.get('message', kind)}"[:250]
        body = body_of(event)
        wanted = [(position, t.url) for position, t in enumerate(self.targets) if t.wants(kind)]
        if not wanted:
            return []
        errors = await asyncio.gather(*(_send_in_child(url, title, body, self._timeout_s) for _, url in wanted))
        results = []
        for (position, url), error in zip(wanted, errors, strict=True):
            sent = Sent(position, service_name(url), error is None, error)
            if error is not None:
                log.error("alert %s to notify[%d] (%s) failed: %s", kind, position, sent.service, error)
            results.append(sent)
        if results and self._store is not None:
            await self._record(results, event)
        return results

    async def _record(self, results: list[Sent], event: Mapping[str, object]) -> None:
        """Keep each URL's last success and failure where status and doctor read them."""
        at = event.get("at")
        try:
            assert self._store is not None
            current = (await self._store.loop_values()).get(NOTIFY_KEY)
            health: dict[str, object] = dict(current) if isinstance(current, dict) else {}
            for sent in results:
                before = health.get(str(sent.position))
                entry = dict(before) if isinstance(before, dict) else {}
                entry["service"] = sent.service
                if sent.ok:
                    entry.update(ok_at=at, error=None)
                else:
                    entry.update(failed_at=at, error=sent.error)
                health[str(sent.position)] = entry
            await self._store.set_loop_values({NOTIFY_KEY: health})
        except Exception as err:
            log.warning("could not record the notifiers' health: %s", err)


def _child_main() -> None:
    """``python -m dispatch.notifiers``: one send, the request on stdin (JSON: url,
    title, body), the outcome on stdout (null, or why it did not go)."""
    request = json.loads(sys.stdin.buffer.read())
    sys.stdout.write(json.dumps(_send_one(request["url"], request["title"], request["body"])))


if __name__ == "__main__":
    _child_main()
