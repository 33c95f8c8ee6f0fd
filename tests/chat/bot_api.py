"""A scripted Telegram Bot API server on loopback, for the bot's tests.

It serves what Vigil's bot calls (getMe, getUpdates as a long poll, sendMessage
with inline keyboards or a forced reply, answerCallbackQuery, editMessageText) at
``/bot<token>/<method>``, and hands out the updates a test pushes (a message, a
reply, a button pressed, from the paired chat or another one).

So that it cannot drift from Telegram: every request's parameters are checked
against the method's documented parameters (required ones present, no unknown
one, limits such as 4096 characters of text and 64 bytes of callback data), and
every object it serves or hands out is parsed by python-telegram-bot's own
models (``Update.de_json``, ``Message.de_json``, ``User.de_json`` …) and checked
for the fields the Bot API documents as always present. A request that breaks a
rule is answered as Telegram would (400) and recorded in ``problems``: each test
asserts there are none.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from telegram import Bot, ForceReply, InlineKeyboardMarkup, Message, ReplyParameters, Update, User

TOKEN = "123456789:AAvigil-test-token-not-a-real-one-xyz"
BOT_USER = {"id": 123456789, "is_bot": True, "first_name": "Vigil", "username": "vigil_test_bot"}

# The Bot API's documented parameters of each method served: (required, optional).
METHODS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "getMe": (frozenset(), frozenset()),
    "getUpdates": (frozenset(), frozenset({"offset", "limit", "timeout", "allowed_updates"})),
    "sendMessage": (
        frozenset({"chat_id", "text"}),
        frozenset(
            {
                "business_connection_id", "message_thread_id", "direct_messages_topic_id", "parse_mode", "entities",
                "link_preview_options", "disable_notification", "protect_content", "allow_paid_broadcast",
                "message_effect_id", "suggested_post_parameters", "reply_parameters", "reply_markup",
            }
        ),
    ),
    "answerCallbackQuery": (frozenset({"callback_query_id"}), frozenset({"text", "show_alert", "url", "cache_time"})),
    "editMessageText": (
        frozenset({"text"}),
        frozenset(
            {
                "business_connection_id", "chat_id", "message_id", "inline_message_id", "parse_mode", "entities",
                "link_preview_options", "reply_markup",
            }
        ),
    ),
}  # fmt: skip
JSON_PARAMS = {"allowed_updates", "entities", "link_preview_options", "reply_parameters", "reply_markup"}
INT_PARAMS = {"offset", "limit", "timeout", "chat_id", "message_id", "message_thread_id", "cache_time"}
# fields the Bot API documents as always present, per object
REQUIRED = {
    "User": ("id", "is_bot", "first_name"),
    "Chat": ("id", "type"),
    "Message": ("message_id", "date", "chat"),
    "CallbackQuery": ("id", "from", "chat_instance"),
    "Update": ("update_id",),
}
_parser = Bot(TOKEN)  # python-telegram-bot's models parse against a Bot; nothing is sent with it


def _require(kind: str, value: dict[str, Any]) -> None:
    missing = [name for name in REQUIRED[kind] if name not in value]
    assert not missing, f"{kind} without {missing}: {value}"


def check_message(value: dict[str, Any]) -> None:
    _require("Message", value)
    _require("Chat", value["chat"])
    if "from" in value:
        _require("User", value["from"])
    if "reply_to_message" in value:
        check_message(value["reply_to_message"])
    parsed = Message.de_json(value, _parser)
    assert parsed is not None
    assert parsed.message_id == value["message_id"]


def check_update(value: dict[str, Any]) -> None:
    _require("Update", value)
    if "message" in value:
        check_message(value["message"])
    if "callback_query" in value:
        query = value["callback_query"]
        _require("CallbackQuery", query)
        _require("User", query["from"])
        if "message" in query:
            check_message(query["message"])
        assert len(query.get("data", "").encode()) <= 64
    parsed = Update.de_json(value, _parser)
    assert parsed is not None
    assert parsed.update_id == value["update_id"]


def _check_markup(markup: dict[str, Any]) -> None:
    if "force_reply" in markup:
        assert markup["force_reply"] is True
        assert ForceReply.de_json(markup, _parser) is not None
        return
    parsed = InlineKeyboardMarkup.de_json(markup, _parser)
    assert parsed is not None
    for row in markup["inline_keyboard"]:
        for button in row:
            assert button["text"], button
            assert 1 <= len(button["callback_data"].encode()) <= 64, button


def _params(method: str, raw: dict[str, str]) -> dict[str, Any]:
    """The request's parameters, decoded as python-telegram-bot sends them (form
    fields; JSON for objects and lists), checked against the method's documentation."""
    required, optional = METHODS[method]
    unknown = set(raw) - required - optional
    missing = required - set(raw)
    assert not unknown, f"{method}: unknown parameters {sorted(unknown)}"
    assert not missing, f"{method}: missing parameters {sorted(missing)}"
    params: dict[str, Any] = {}
    for name, text in raw.items():
        if name in JSON_PARAMS:
            params[name] = json.loads(text)
        elif name in INT_PARAMS:
            params[name] = int(text)
        else:
            params[name] = text
    if "text" in params:
        limit = 200 if method == "answerCallbackQuery" else 4096
        assert 1 <= len(params["text"]) <= limit, f"{method}: text of {len(params['text'])} characters"
    if "reply_markup" in params:
        _check_markup(params["reply_markup"])
    if "reply_parameters" in params:
        assert ReplyParameters.de_json(params["reply_parameters"], _parser) is not None
    return params


@dataclass
class BotApi:
    """The server's state: what the bot sent, what the tests push."""

    port: int = 0
    updates: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)  # messages sendMessage made, as served
    edits: list[dict[str, Any]] = field(default_factory=list)  # editMessageText parameters
    answers: list[dict[str, Any]] = field(default_factory=list)  # answerCallbackQuery parameters
    requests: list[str] = field(default_factory=list)  # methods called, in order
    problems: list[str] = field(default_factory=list)  # requests that broke the documented rules
    throttle: int = 0  # this many sendMessage calls are answered 429 (flood control), retry after 1 s
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _next_update: int = 1
    _next_message: int = 1
    _server: ThreadingHTTPServer | None = None
    _closing: bool = False

    @property
    def base_url(self) -> str:
        """What ``[chat.telegram] api_url`` names (python-telegram-bot's base_url)."""
        return f"http://127.0.0.1:{self.port}/bot"

    # --- what a person does -------------------------------------------------------
    def push(self, update: dict[str, Any]) -> None:
        with self._cond:
            update = {"update_id": self._next_update, **update}
            self._next_update += 1
            check_update(update)
            self.updates.append(update)
            self._cond.notify_all()

    def say(
        self, chat_id: int, text: str, *, user_id: int | None = None, reply_to: dict[str, Any] | None = None
    ) -> None:
        """A person writes ``text`` in chat ``chat_id`` (a reply to ``reply_to``)."""
        user = {"id": user_id or chat_id, "is_bot": False, "first_name": "Ada", "username": f"ada{chat_id}"}
        message: dict[str, Any] = {
            "message_id": self._message_id(),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private", "first_name": "Ada"},
            "from": user,
            "text": text,
        }
        if text.startswith("/"):
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split(maxsplit=1)[0])}]
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        self.push({"message": message})

    def press(self, chat_id: int, card: dict[str, Any], label: str, *, user_id: int | None = None) -> None:
        """A person presses the button labelled ``label`` on the bot's message ``card``."""
        data = button_data(card, label)
        user = {"id": user_id or chat_id, "is_bot": False, "first_name": "Ada", "username": f"ada{chat_id}"}
        query = {"id": f"q{self._next_update}", "from": user, "chat_instance": f"ci{chat_id}", "message": card}
        self.push({"callback_query": {**query, "data": data}})

    def _message_id(self) -> int:
        with self._cond:
            self._next_message += 1
            return self._next_message

    # --- serving --------------------------------------------------------------------
    def handle(self, method: str, raw: dict[str, str]) -> tuple[int, dict[str, Any]]:
        self.requests.append(method)
        if method not in METHODS:
            self.problems.append(f"unexpected method {method}")
            return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
        if method == "sendMessage" and self.throttle > 0:
            self.throttle -= 1
            description = "Too Many Requests: retry after 1"
            return 429, {"ok": False, "error_code": 429, "description": description, "parameters": {"retry_after": 1}}
        try:
            params = _params(method, raw)
            result = self._result(method, params)
        except AssertionError as err:
            self.problems.append(f"{method}: {err}")
            return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: {err}"}
        return 200, {"ok": True, "result": result}

    def _result(self, method: str, params: dict[str, Any]) -> Any:
        if method == "getMe":
            assert User.de_json(BOT_USER, _parser) is not None
            return BOT_USER
        if method == "getUpdates":
            offset, timeout = params.get("offset", 0), params.get("timeout", 0)
            deadline = time.monotonic() + timeout
            with self._cond:
                while True:
                    ready = [u for u in self.updates if u["update_id"] >= offset]
                    left = deadline - time.monotonic()
                    if ready or left <= 0 or self._closing:
                        return ready[: params.get("limit", 100)]
                    self._cond.wait(left)
        if method == "sendMessage":
            message: dict[str, Any] = {
                "message_id": self._message_id(),
                "date": int(time.time()),
                "chat": {"id": params["chat_id"], "type": "private", "first_name": "Ada"},
                "from": BOT_USER,
                "text": params["text"],
            }
            markup = params.get("reply_markup")
            if markup is not None and "inline_keyboard" in markup:
                message["reply_markup"] = markup
            check_message(message)
            with self._cond:
                self.sent.append(message)
                self._cond.notify_all()
            return message
        if method == "answerCallbackQuery":
            self.answers.append(params)
            return True
        assert method == "editMessageText"
        assert "chat_id" in params
        assert "message_id" in params
        self.edits.append(params)
        edited = {
            "message_id": params["message_id"],
            "date": int(time.time()),
            "chat": {"id": params["chat_id"], "type": "private", "first_name": "Ada"},
            "from": BOT_USER,
            "text": params["text"],
        }
        check_message(edited)
        return edited

    def start(self) -> None:
        """Serve on ``port`` (0: a free one, kept for later restarts)."""
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
                prefix = f"/bot{TOKEN}/"
                if not self.path.startswith(prefix):
                    api.problems.append(f"a request to {self.path.replace(TOKEN, '<token>')} (wrong token or path)")
                    status, reply = 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
                else:
                    fields = {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
                    if self.headers.get("content-type", "").startswith("application/json") and body:
                        fields = {k: v if isinstance(v, str) else json.dumps(v) for k, v in json.loads(body).items()}
                    status, reply = api.handle(self.path[len(prefix) :], fields)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the bot stopped polling
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests assert on what was received."""

        ThreadingHTTPServer.allow_reuse_address = True
        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._closing = False
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Go away (connections refused) until ``start`` again; long polls end."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def button_data(card: dict[str, Any], label: str) -> str:
    """The callback data of the button labelled ``label`` on ``card``."""
    for row in card.get("reply_markup", {}).get("inline_keyboard", []):
        for button in row:
            if button["text"] == label:
                return str(button["callback_data"])
    raise AssertionError(f"no button {label!r} on {card.get('text')!r}")


def labels(card: dict[str, Any]) -> list[str]:
    return [b["text"] for row in card.get("reply_markup", {}).get("inline_keyboard", []) for b in row]


@contextmanager
def bot_api() -> Iterator[BotApi]:
    """A running scripted Bot API on 127.0.0.1, stopped on exit."""
    api = BotApi()
    api.start()
    try:
        yield api
    finally:
        api.stop()
