"""stdout is split into lines the same way whatever the chunk boundaries, and the
untrusted-data fence cannot be closed from inside (property tests)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch.executors import child
from dispatch.prompt import fence


async def read_all(data: bytes, cuts: list[int]) -> list[bytes]:
    reader = asyncio.StreamReader()
    position = 0
    for cut in sorted(set(cuts)):
        reader.feed_data(data[position:cut])
        position = cut
    reader.feed_data(data[position:])
    reader.feed_eof()
    lines: list[bytes] = []
    await child._read_lines(reader, lines.append)
    return lines


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(min_value=0, max_value=300), max_size=10))
def test_lines_do_not_depend_on_chunking(data: bytes, cuts: list[int]) -> None:
    cuts = [c for c in cuts if c <= len(data)]
    lines = asyncio.run(read_all(data, cuts))
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()  # a final newline ends the last line; it does not start another
    assert lines == [line.rstrip(b"\r") for line in expected]


def test_a_line_longer_than_any_chunk_arrives_whole() -> None:
    data = b"x" * (3 * child.CHUNK_BYTES + 17) + b"\nshort\n"
    assert asyncio.run(read_all(data, [])) == [b"x" * (3 * child.CHUNK_BYTES + 17), b"short"]


@given(st.text(max_size=200))
def test_the_fence_closes_exactly_once(text: str) -> None:
    fenced = fence(text)
    closing = fenced.rsplit("\n", 1)[1]
    assert fenced.count(closing) == 1
    assert fenced.startswith("<<<untrusted-data ")
