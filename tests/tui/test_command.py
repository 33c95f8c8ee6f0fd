"""`vigil tui` refuses bad combinations and unusable databases with one line."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import VigilRunner


def test_readonly_does_not_create_a_missing_database(vigil: VigilRunner, home: Path) -> None:
    result = vigil("tui", "--readonly")
    assert result.returncode == 2
    assert result.stderr.startswith("vigil: error: no database at ")
    assert "--readonly does not create one" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (home / "data" / "vigil.db").exists()


def test_readonly_and_with_loop_exclude_each_other(vigil: VigilRunner) -> None:
    result = vigil("tui", "--readonly", "--with-loop")
    assert result.returncode == 2
    assert "exclude each other" in result.stderr


def test_a_file_that_is_not_a_database_is_one_line(vigil: VigilRunner, home: Path) -> None:
    (home / "data" / "vigil.db").write_bytes(b"not sqlite at all" * 200)
    result = vigil("tui")
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("vigil: error: ")
    assert "not a Vigil database" in result.stderr
    assert "Traceback" not in result.stderr


def test_without_a_terminal_it_says_so_in_one_line(vigil: VigilRunner, home: Path) -> None:
    """`vigil tui | cat` wrote escape codes into the pipe and never exited."""
    vigil("task", "add", "x", check=True)
    result = vigil("tui", timeout=30)  # its output is a pipe here
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "vigil: error: vigil tui needs a terminal (its input or output is not one); try vigil status or task list\n"
    )
