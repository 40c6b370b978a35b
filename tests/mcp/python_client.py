#!/usr/bin/env python3
"""The reference Python MCP client (PyPI `mcp`, a client no one here wrote) against POST /v1/mcp.

Usage: python_client.py URL TOKEN ITEM

Connects over the streamable HTTP transport with the bearer token, initializes, lists the tools,
calls each one for ITEM (get_observation on the current offer's id) and prints one JSON object:
the server's name, the tool names, the current offers and the history as the tools'
structured content showed them, and each tool's text summary. Exit status 0 when every call
answered without an error; the caller checks the figures.
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def run(url: str, token: str, item: str) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                info = await session.initialize()
                tools = await session.list_tools()
                offers = await session.call_tool("get_current_offers", {"item": item})
                history = await session.call_tool("get_offer_history", {"item": item})
                calls = {"get_current_offers": offers, "get_offer_history": history}
                current = (offers.structured_content or {}).get("offers", [])
                if current:
                    calls["get_observation"] = await session.call_tool(
                        "get_observation", {"observation_id": current[0]["observation_id"]}
                    )
                errors = {name: bool(result.is_error) for name, result in calls.items()}
                return {
                    "server": info.server_info.name,
                    "protocol_version": info.protocol_version,
                    "tools": [t.name for t in tools.tools],
                    "descriptions": {t.name: t.description for t in tools.tools},
                    "read_only": {
                        t.name: bool(t.annotations and t.annotations.read_only_hint)
                        for t in tools.tools
                    },
                    "offers": current,
                    "history": (history.structured_content or {}).get("observations", []),
                    "observation": calls.get("get_observation") and calls["get_observation"].structured_content,
                    "summaries": {
                        name: "\n".join(c.text for c in result.content if getattr(c, "text", None))
                        for name, result in calls.items()
                    },
                    "errors": errors,
                }


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    result = asyncio.run(run(*sys.argv[1:]))
    print(json.dumps(result, indent=2))
    return 1 if any(result["errors"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
