"""
berth's Python SDK (standard library only, Python 3.11+): `Berth` blocking, `AsyncBerth`
for asyncio. docs/sdk-python.md shows both and maps E2B's names onto berth's.

    from berth import Berth
    berth = Berth()  # BERTH_URL, BERTH_TOKEN
    berth.agents.create("sh", provider="command")
    reply = berth.sessions.send_and_wait("s1", "echo hi", agent="sh")
"""

from .client import AsyncBerth, Berth
from .errors import BerthConnectionError, BerthError, SandboxRestartedError
from .operations import CommandResult, Event, Reply

__all__ = [
    "AsyncBerth",
    "Berth",
    "BerthConnectionError",
    "BerthError",
    "CommandResult",
    "Event",
    "Reply",
    "SandboxRestartedError",
]
