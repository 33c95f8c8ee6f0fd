"""The harness's arithmetic and its docs rewriting (no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

from bench.harness import Contender, Result, interleave, percentile, record, speed_ratio


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 99) == 99.0
    assert percentile(values, 50) == 50.0
    assert percentile([7.0], 99) == 7.0


def test_speed_ratio_pairs_rounds() -> None:
    vigil = Result("vigil", "FULL", round_means_s=[2.0, 20.0, 2.0])
    other = Result("other", "FULL", round_means_s=[1.0, 10.0, 1.0])
    assert speed_ratio(vigil, other) == 0.5


def test_interleave_rotates_and_drops_warmup() -> None:
    calls: list[str] = []

    def contender(name: str) -> Contender:
        def run(n: int) -> list[float]:
            calls.append(name)
            return [1.0] * n

        return Contender(name, "FULL", run)

    results = interleave([contender("a"), contender("b")], rounds=2, ops=3, warmup=1)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert [len(r.samples_s) for r in results] == [6, 6]
    assert [len(r.round_means_s) for r in results] == [2, 2]


def test_record_replaces_only_between_its_markers(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text("# P\n\nintro\n<!-- bench:x -->\nold\n<!-- /bench:x -->\nreading kept\n")
    assert record("x", "new table", doc)
    assert doc.read_text() == "# P\n\nintro\n<!-- bench:x -->\nnew table\n<!-- /bench:x -->\nreading kept\n"
    assert not record("missing", "text", doc)
