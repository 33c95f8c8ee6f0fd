"""The chat: a Telegram bot that is the person, not just a notifier (docs/chat.md).

``cards`` says what the bot sends (text and buttons, pure); ``actions`` does what a
person asks from the chat, each the same store operation as the CLI's, audited as
``human via telegram …``; ``pairing`` keeps the one chat allowed to act and the
bot's health and cursor in ``loop_state``; ``telegram`` talks to the Bot API
through python-telegram-bot (long polling: no open port).
"""
