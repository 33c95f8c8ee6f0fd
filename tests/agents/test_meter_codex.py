"""Every cap metered or refused, with the real Codex through the real `vigil`
against the local model server (issue 37, item 1). Codex reports no dollar figure:
a model newer than the price table is metered at its family's price, and a cap on
a model of no price at all is refused, when the task is added and when it is
claimed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.clis import needs_codex
from tests.agents.codex_home import CodexHome
from tests.agents.model_server import Usage
from tests.agents.openai_api import openai_server, shell

pytestmark = [needs_codex, pytest.mark.slow]


def test_a_model_newer_than_the_table_is_metered_at_its_familys_price_and_stopped(tmp_path: Path) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        task_id = home.add_task("Spend carefully", "--max-cost", "0.2", "--model", "gpt-7")
        big = Usage(input=100_000, output=10, cache_read=0, cache_write=0)  # $0.50 at the gpt family's $5/M
        api.script.set([shell("sleep 1; echo one", usage=big), shell("sleep 1; echo two", usage=big)] * 3)
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "over_budget", run["error"]
    assert "past the task's max_cost_usd of $0.20" in run["error"]
    assert run["cost_usd"] >= 0.5  # not $0: the family's price metered it
    assert run["priced_by"] == "tokens: gpt-7 at the gpt family's price"
    assert home.task(task_id)["status"] == "failed"


def test_a_cap_on_a_model_of_no_price_is_refused_when_added_and_when_claimed(tmp_path: Path) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url, codex={"model": "house-model-1"})
        refused = home.vigil("task", "add", "Spend carefully", "--max-cost", "0.2")
        assert refused.returncode == 2
        assert "refused: a cap of $0.20 cannot be metered: model 'house-model-1' has no price" in refused.stderr
        # a skill's cap reaches the dispatcher: refused there, before Codex starts
        skill = home.path / "skills" / "capped"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text("---\ndescription: Capped.\nmax_cost_usd: 0.2\n---\nDo it.\n")
        (home.path / "vigil.toml").write_text(
            (home.path / "vigil.toml").read_text().replace('model = "house-model-1"', 'model = "gpt-5.4"')
        )
        task_id = home.add_task("Spend carefully", "--skills", "capped")
        (home.path / "vigil.toml").write_text(
            (home.path / "vigil.toml").read_text().replace('model = "gpt-5.4"', 'model = "house-model-1"')
        )
        proc = home.vigil("dispatch", "once")
        asked = api.server.recorded("/v1/responses")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "failed"
    assert run["error"].startswith("refused: the task's max_cost_usd of $0.20 cannot be metered: model 'house-model-1'")
    assert asked == []  # Codex never started
    assert home.task(task_id)["status"] == "failed"
