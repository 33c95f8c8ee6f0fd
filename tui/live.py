"""A screen whose data comes from the store and refreshes when the data changes.

The app probes ``PRAGMA data_version`` and calls ``data_changed()`` on the screen
in front; only then does the screen start a worker that runs its bounded
``load()`` and hands the result to ``apply()``. Loads run one at a time; a
request during a load runs right after it. A result that arrives after the
screen was closed or hidden is dropped. ``p`` freezes the view: changes (other
processes' and this TUI's own writes) are counted, not loaded, until it thaws;
only a change of the view itself (a new filter) loads while frozen. A load or an
apply that fails is reported once and tried again after ``RETRY_FIRST_S``, then
later and later (up to ``RETRY_MAX_S``) until one goes through.
"""

from __future__ import annotations

import time
from typing import Any, Generic, TypeVar

from rich.text import Text
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static

from tui.context import Context, log
from tui.safety import guard_handlers, report

DATA_RELOAD_GAP_S = 0.5  # commits that keep coming reload at most this often (CPU under a drain)
RETRY_FIRST_S = 0.5  # a failed refresh is tried again after this, doubling up to RETRY_MAX_S
RETRY_MAX_S = 8.0


class Banner(Static):
    """A red line at the top of a screen while the database cannot be used."""

    DEFAULT_CSS = "Banner { dock: top; height: auto; background: $error; color: $text; padding: 0 1; display: none; }"


Data = TypeVar("Data")


class LiveScreen(Screen[None], Generic[Data]):
    """Subclasses implement ``load`` (async, queries only) and ``apply`` (widgets
    only) over one ``Data`` type: what a load returns is what apply shows.
    Their ``action_*`` and ``on_*`` handlers are guarded: an exception is shown and
    logged, and the app carries on."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        guard_handlers(cls)

    def __init__(self, ctx: Context, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.ctx = ctx
        self.frozen = False
        self.changes_waiting = 0
        self.loads = 0  # results applied (tests wait on it)
        self._loading = False
        self._again = False  # another load was asked for while one ran
        self._discard = False  # ...and the result in flight is outdated: do not show it
        self.failures = 0  # refreshes that failed in a row (0: the last one went through)
        self._last_data_reload = 0.0  # monotonic s of the last reload a commit caused
        self._data_timer: Timer | None = None
        self._retry_timer: Timer | None = None

    @property
    def refreshing(self) -> bool:
        """A load (or the apply of its result) is under way."""
        return self._loading

    async def load(self) -> Data:
        raise NotImplementedError

    def apply(self, data: Data) -> None:
        raise NotImplementedError

    def data_changed(self) -> None:
        """Another process committed: reload, or count it while frozen. Commits that
        keep coming (a drain) reload at most every ``DATA_RELOAD_GAP_S``: the last
        reload is followed by one more, so the screen always ends on the truth."""
        wait = self._last_data_reload + DATA_RELOAD_GAP_S - time.monotonic()
        if wait > 0 and not self.frozen:
            if self._data_timer is None:
                self._data_timer = self.set_timer(wait, self._data_reload_due)
            return
        self._last_data_reload = time.monotonic()
        self.reload(discard_running=False)

    def _data_reload_due(self) -> None:
        self._data_timer = None
        if self.is_attached:
            self.data_changed()

    def frozen_changed(self) -> None:
        """Hook: the freeze or the count of waiting changes moved."""

    def reload(self, *, discard_running: bool = True, even_frozen: bool = False) -> None:
        """Load and show fresh data; while frozen, count a change instead (unless
        ``even_frozen``: the person changed the view itself). One load runs at a
        time: a request that comes while one runs is queued (never cancels it, so a
        slow screen under a stream of commits still shows progress).
        ``discard_running`` (a filter or window the person just changed) drops the
        result in flight instead of showing it."""
        if self.frozen and not even_frozen:
            self.changes_waiting += 1
            self.frozen_changed()
            return
        if self._loading:
            self._again = True
            self._discard = self._discard or discard_running
            return
        self._loading = True
        self.run_worker(self._load_and_apply(), group="load", exit_on_error=False)

    async def _load_and_apply(self) -> None:
        try:
            while True:
                self._again = self._discard = False
                try:
                    data = await self.load()
                    if not self.is_attached or self.app.screen is not self:
                        return  # closed or hidden meanwhile: a stale result must not touch widgets
                    if not self._discard:
                        self.apply(data)
                        self.loads += 1
                except Exception as err:
                    self._refresh_failed(err)
                    return
                if self.failures:
                    self.failures = 0
                    self.refresh_recovered()
                if not self._again:
                    return
        finally:
            self._loading = False

    def _refresh_failed(self, err: Exception) -> None:
        """Say it (once per run of failures, and in the log each time) and try again
        soon, later the more it fails: a failed refresh never leaves the screen as
        it was without a word, nor for good."""
        self.failures += 1
        what = f"refreshing {self.title or 'the screen'}"
        if self.failures == 1:
            report(self, err, what)
        else:
            log.warning("%s failed again (%d in a row): %s", what, self.failures, err)
        self.refresh_failing(err)
        if self._retry_timer is not None:
            self._retry_timer.stop()
        delay = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (self.failures - 1))
        self._retry_timer = self.set_timer(delay, self._retry_now)

    def _retry_now(self) -> None:
        self._retry_timer = None
        if self.is_attached and self.failures:
            self.reload(even_frozen=True)

    def refresh_failing(self, err: Exception) -> None:
        """Hook: a refresh failed and will be tried again (say it on the screen)."""

    def refresh_recovered(self) -> None:
        """Hook: a refresh went through after failures."""

    def times_changed(self) -> None:
        """``z`` switched between local time and UTC: show the times again. By
        default a reload (a frozen view is frozen in its rows, not its clock)."""
        self.reload(even_frozen=True)

    def show_banner(self) -> None:
        """Show ``ctx.banner`` in this screen's ``Banner`` (if it has one)."""
        for banner in self.query(Banner):
            banner.update(Text(self.ctx.banner))
            banner.display = bool(self.ctx.banner)

    def on_screen_resume(self) -> None:
        self.show_banner()
        if not self.frozen:  # a frozen view stays as it was when a dialog closes
            self.reload()
