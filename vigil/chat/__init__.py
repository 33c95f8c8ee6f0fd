"""The chat: a Telegram bot that is the person, not just a notifier (docs/chat.md).

``cards`` says what the bot sends (text and buttons, pure); ``feed`` follows the
audit trail and the gate and sends a card for each moment a person is needed;
``actions`` does what a person asks from the chat, each the same operation as the
CLI's, audited as ``human via telegram …``; ``pairing`` keeps the one chat
allowed to act, the feed's cursor and the bot's health in ``loop_state``;
``telegram`` talks to the Bot API through python-telegram-bot (long polling: no
open port); ``service`` runs it inside ``vigil run`` or alone.
"""
