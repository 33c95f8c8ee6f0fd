"""``FileCache``: a file is parsed once and again only when it changes on disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dispatch.filecache import FileCache


class Counting:
    """A parse function that counts its calls and refuses text starting with "bad"."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, path: Path, text: str) -> list[str]:
        self.calls += 1
        if text.startswith("bad"):
            raise ValueError(f"{path.name}: bad text")
        return text.split()


def touch_later(path: Path) -> None:
    """Move the file's mtime on by a second, as a later write would."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_an_unchanged_file_is_parsed_once(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("a b", encoding="utf-8")
    parse = Counting()
    cache = FileCache(parse)

    first = cache.load(path)
    second = cache.load(path)

    assert first == ["a", "b"]
    assert second is first
    assert parse.calls == 1


def test_an_edit_is_seen_by_the_next_load_even_at_the_same_size(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("a b", encoding="utf-8")
    cache = FileCache(Counting())
    assert cache.load(path) == ["a", "b"]

    path.write_text("c d", encoding="utf-8")  # same size
    touch_later(path)

    assert cache.load(path) == ["c", "d"]


def test_a_file_replaced_by_rename_is_seen(tmp_path: Path) -> None:
    """Editors save by writing a new file and renaming it over the old one."""
    path = tmp_path / "f.txt"
    path.write_text("a b", encoding="utf-8")
    cache = FileCache(Counting())
    assert cache.load(path) == ["a", "b"]

    replacement = tmp_path / "f.txt.new"
    replacement.write_text("x y", encoding="utf-8")
    stat = path.stat()
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with the old times
    replacement.replace(path)

    assert cache.load(path) == ["x", "y"]


def test_errors_are_not_cached(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    parse = Counting()
    cache = FileCache(parse)
    with pytest.raises(FileNotFoundError):
        cache.load(path)

    path.write_text("bad one", encoding="utf-8")
    with pytest.raises(ValueError, match="bad text"):
        cache.load(path)
    with pytest.raises(ValueError, match="bad text"):
        cache.load(path)  # parsed again, not remembered as bad
    assert parse.calls == 2

    path.write_text("good one", encoding="utf-8")
    touch_later(path)
    assert cache.load(path) == ["good", "one"]


def test_a_deleted_file_raises_though_it_was_loaded_before(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("a", encoding="utf-8")
    cache = FileCache(Counting())
    cache.load(path)

    path.unlink()

    with pytest.raises(FileNotFoundError):
        cache.load(path)


def test_only_the_most_recently_loaded_files_are_kept(tmp_path: Path) -> None:
    paths = [tmp_path / f"{n}.txt" for n in range(3)]
    for path in paths:
        path.write_text(path.stem, encoding="utf-8")
    parse = Counting()
    cache = FileCache(parse, max_files=2)

    for path in paths:
        cache.load(path)
    cache.load(paths[2])  # still kept
    assert parse.calls == 3
    cache.load(paths[0])  # was dropped for the third file
    assert parse.calls == 4
