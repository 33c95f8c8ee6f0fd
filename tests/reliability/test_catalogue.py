"""The bad-input catalogue (tests/reliability/catalogue_inputs.py): each case shows
the user a clear message with the right exit code and leaves stored data intact;
the table in docs/reliability.md is the one the case list generates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reliability.catalogue import DOC, Case, current_doc_section, doc_section, run_case, seed_data
from tests.reliability.catalogue_bounds import CASES
from vigil.home import init_home

pytestmark = pytest.mark.slow

AREAS = {"CLI", "vigil.toml", "sensor", "agent output", "skill", "database", "stored text"}


def test_the_catalogue_covers_every_area_with_at_least_40_cases() -> None:
    assert len(CASES) >= 40
    assert {case.area for case in CASES} == AREAS


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeded database's folder, made once through the real ``vigil``."""
    return seed_data(tmp_path_factory.mktemp("catalogue"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.area}: {c.title}" for c in CASES])
def test_bad_input_is_refused_clearly_and_loses_nothing(case: Case, tmp_path: Path, seeded: Path) -> None:
    if case.needs_root and os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    home = tmp_path / "home"
    init_home(home)
    result = run_case(case, home, seeded)
    assert result.problems == (), f"{result.shown!r}\n{result.stderr}"


def test_the_table_in_the_doc_is_generated_from_the_cases() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert current_doc_section(text) == doc_section(CASES), "run: python -m tests.reliability.catalogue --write"
