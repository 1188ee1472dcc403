"""
The berth clients: `Berth` (blocking) and `AsyncBerth` (asyncio, every method a
coroutine). The surface is written once: each method builds an operation (operations.py)
and hands it to its client's runner, which runs it blocking or returns the coroutine that
runs it. Names follow the TypeScript SDK (src/client/) in Python style, and E2B's where they
fit (`commands.run`, `on_stdout`, `on_stderr`).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable
from urllib.parse import urlencode

from . import operations as ops
from .drivers import run_async, run_sync
from .operations import Event, q
from .transport import AsyncTransport, SyncTransport

# Where `berth up` listens by default (BERTH_PORT 7420).
DEFAULT_URL = "http://127.0.0.1:7420"

Runner = Callable[[ops.Operation], Any]


class Agents:
    def __init__(self, run: Runner):
        self._run = run

    def create(self, name: str, provider: str = "command", **spec: Any) -> Any:
        """Creates an agent; `spec` holds the API's other fields as it names them (e.g. mode="resident", image=...)."""
        return self._run(ops.request("POST", "/v1/agents", {"name": name, "provider": provider, **spec}))

    def list(self) -> Any:
        return self._run(ops.list_all("/v1/agents", "agents"))

    def get(self, name: str) -> Any:
        return self._run(ops.request("GET", f"/v1/agents/{q(name)}"))


class Sessions:
    def __init__(self, run: Runner):
        self._run = run

    def send(self, session_id: str, text: str, agent: str | None = None) -> Any:
        """Posts a message and returns at once: `{"message", "session", "eventId"}` (what `wait_for_reply` takes)."""
        return self._run(ops.request("POST", f"/v1/sessions/{q(session_id)}/messages", _message(text, agent)))

    def wait_for_reply(self, session_id: str, posted: dict, on_event: Callable[[Event], Any] | None = None) -> Any:
        """The Reply to a posted message; raises BerthError with the failure's code when its turn failed (or the session is held)."""
        return self._run(ops.wait_for_reply(session_id, posted, on_event))

    def send_and_wait(
        self,
        session_id: str,
        text: str,
        agent: str | None = None,
        on_event: Callable[[Event], Any] | None = None,
    ) -> Any:
        """Posts a message and waits for its Reply (the TypeScript SDK's `sessions.send`)."""
        return self._run(ops.send_and_wait(session_id, _message(text, agent), on_event))

    def get(self, session_id: str) -> Any:
        return self._run(ops.request("GET", f"/v1/sessions/{q(session_id)}"))

    def list(self, **filters: Any) -> Any:
        """Every session the filters match (e.g. status="running", agent="sh"), page after page."""
        query = urlencode({k: v for k, v in filters.items() if v is not None})
        return self._run(ops.list_all(f"/v1/sessions{'?' + query if query else ''}", "sessions"))

    def interrupt(self, session_id: str, turn: str | None = None) -> Any:
        """Stops the running turn now (its changes discarded); returns the turn. Raises NO_RUNNING_TURN when none runs."""
        query = urlencode({"discard": "true", **({"turn": turn} if turn else {})})
        return self._run(_field(ops.request("POST", f"/v1/sessions/{q(session_id)}/interrupt?{query}"), "turn"))


class Commands:
    def __init__(self, run: Runner):
        self._run = run

    def run(
        self,
        session_id: str,
        cmd: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_ms: int | None = None,
        on_stdout: Callable[[str], Any] | None = None,
        on_stderr: Callable[[str], Any] | None = None,
    ) -> Any:
        """
        Runs `cmd` (/bin/sh -c) in the session's live sandbox and returns its CommandResult;
        `on_stdout`/`on_stderr` get the output as it comes. Raises SandboxRestartedError when the
        sandbox ended mid-command, BerthError NO_LIVE_SANDBOX when the session has none.
        """
        body: dict[str, Any] = {"command": cmd}
        if cwd is not None:
            body["cwd"] = cwd
        if env is not None:
            body["env"] = env
        if timeout_ms is not None:
            body["timeoutMs"] = timeout_ms
        return self._run(ops.run_command(session_id, body, on_stdout, on_stderr))


def _message(text: str, agent: str | None) -> dict:
    return {"text": text, **({"agent": agent} if agent else {})}


def _field(op: ops.Operation, key: str) -> ops.Operation:
    return (yield from op)[key]


class _Client:
    def __init__(self, url: str | None, token: str | None, transport_type: type, driver: Callable):
        self.url = url or os.environ.get("BERTH_URL") or DEFAULT_URL
        self.token = token if token is not None else os.environ.get("BERTH_TOKEN")
        run = functools.partial(driver, transport_type(self.url, self.token))
        self.agents = Agents(run)
        self.sessions = Sessions(run)
        self.commands = Commands(run)


class Berth(_Client):
    """The blocking client. `url` defaults to BERTH_URL (else http://127.0.0.1:7420), `token` to BERTH_TOKEN."""

    def __init__(self, url: str | None = None, token: str | None = None):
        super().__init__(url, token, SyncTransport, run_sync)


class AsyncBerth(_Client):
    """The asyncio client: the same methods as `Berth`, each a coroutine."""

    def __init__(self, url: str | None = None, token: str | None = None):
        super().__init__(url, token, AsyncTransport, run_async)
