"""Reading an HTTP response with a byte cap, for the ``http`` and ``feed`` sensors.

The body is streamed and reading stops as soon as it passes ``max_bytes``, so a 5 GB
(or endless) response costs at most ``max_bytes`` of memory and bandwidth. Network
failures raise ``httpx.HTTPError`` subclasses: the sensor run becomes an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx


class BodyTooLarge(ValueError):
    """The response is larger than the configured cap."""


@dataclass(frozen=True)
class Fetched:
    status: int
    headers: httpx.Headers
    body: bytes


async def fetch_capped(
    client: httpx.AsyncClient, url: str, *, max_bytes: int, headers: Mapping[str, str] | None = None
) -> Fetched:
    """GET ``url``; raises ``BodyTooLarge`` past ``max_bytes`` (declared or read)."""
    async with client.stream("GET", url, headers=dict(headers or {})) as response:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise BodyTooLarge(f"{url}: body is {declared} bytes, more than max_bytes ({max_bytes})")
        chunks: list[bytes] = []
        total = 0
        async for chunk in response.aiter_bytes():
            total += len(chunk)
            if total > max_bytes:
                raise BodyTooLarge(f"{url}: body is larger than max_bytes ({max_bytes}); stopped reading")
            chunks.append(chunk)
        return Fetched(response.status_code, response.headers, b"".join(chunks))
