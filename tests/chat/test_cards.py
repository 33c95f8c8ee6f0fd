"""The cards' pure parts: callback data within Telegram's 64 bytes and read back,
the reference line, pages cut at line ends and escape-free."""

from __future__ import annotations

from vigil.chat.cards import PAGE, pages, press_data, read_press, read_reference, reference
from vigil.models import MAX_ID


def test_callback_data_fits_telegram_and_reads_back_for_the_largest_ids() -> None:
    for action in ("approve", "reject", "retry", "cancel", "cancelyes", "choice", "diff", "more", "resume"):
        data = press_data(action, MAX_ID, 2**63 - 1, 999)
        assert len(data.encode()) <= 64
        press = read_press(data)
        assert press is not None
        assert (press.action, press.task_id, press.ref, press.arg) == (action, MAX_ID, 2**63 - 1, 999)
    assert read_press("approve:1") is None
    assert read_press("approve:x:1") is None


def test_the_reference_line_is_read_back_from_the_end_of_a_card() -> None:
    text = f"Task #3: x\n\nThe agent asks: see task #9 · ref 1?\n\n{reference('home', 3, 77)}"
    assert read_reference(text) == (3, 77)
    assert read_reference("no reference here") is None


def test_pages_keep_lines_whole_and_show_control_characters_escaped() -> None:
    text = "".join(f"line {n} \x1b[31mred\x1b[0m\n" for n in range(2000)) + "x" * (PAGE + 10)
    cut = pages(text)
    assert all(len(page) <= PAGE for page in cut)
    assert "\x1b" not in "".join(cut)
    assert "".join(cut) == text.replace("\x1b", "\\x1b")  # nothing lost
    assert all(page.endswith("\n") for page in cut[:-2])  # cut at line ends where a line fits
    assert pages("") == [""]
