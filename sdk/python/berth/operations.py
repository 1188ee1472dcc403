"""
What each SDK call does, written once for the sync and the async client: a generator that
yields the I/O it needs and gets its result back (sans-I/O). The operations a generator may
yield are tuples:

  ("request", method, path, body)      -> the answer's JSON (None for an empty answer)
  ("open", method, path, body, accept) -> a stream handle (a refused request raises BerthError)
  ("readline", stream)                 -> the next line without its newline, or None at the end
  ("close", stream)                    -> None
  ("sleep", seconds)                   -> None

A driver (drivers.py) runs the generator over a transport, blocking or with asyncio, and
closes every stream it opened when the generator ends. Nothing here does I/O.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generator
from urllib.parse import quote, urlencode

from .errors import BerthConnectionError, BerthError, error_from_exec_line

Operation = Generator[tuple, Any, Any]

# How long a broken event stream is followed again with no host answering before the wait gives up.
RECONNECT_FOR_S = 30.0
RECONNECT_PAUSE_S = 0.25
# How long commands.run sends again while the API answers SANDBOX_UNREACHABLE (nothing ran), and its backoff.
EXEC_RETRY_S = 10.0
EXEC_BACKOFF_FIRST_S = 0.25
EXEC_BACKOFF_MAX_S = 2.0


def q(segment: str) -> str:
    """One path segment, escaped."""
    return quote(str(segment), safe="")


@dataclass(frozen=True)
class Event:
    """One event of a session's stream. ``id`` is None for events the server computes (a moved queue position)."""

    id: int | None
    type: str
    data: dict


@dataclass(frozen=True)
class Reply:
    """The agent's reply to a message: its text, its own message id, and the messages it answers."""

    text: str
    data: Any
    message_id: int
    in_reply_to: list[int]
    scope: str


@dataclass
class CommandResult:
    """What ``commands.run`` returns: the command's exit code (None when a signal ended it) and its whole output."""

    exit_code: int | None
    stdout: str
    stderr: str
    signal: str | None = None
    timed_out: bool = False


@dataclass
class _Output:
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


def request(method: str, path: str, body: Any = None) -> Operation:
    return (yield ("request", method, path, body))


def list_all(path: str, key: str) -> Operation:
    """Every item of a keyset listing (``{key: [...], "next": cursor}``), following ``next`` page after page."""
    items: list = []
    cursor = None
    sep = "&" if "?" in path else "?"
    while True:
        page = yield ("request", "GET", path if cursor is None else f"{path}{sep}{urlencode({'after': cursor})}", None)
        items.extend(page[key])
        cursor = page.get("next")
        if cursor is None:
            return items


def parse_sse_block(block: str) -> Event | None:
    """One Server-Sent Events block; None for a comment or a block without data (keepalive, retry)."""
    event_id, event_type, data = None, "message", []
    for line in block.split("\n"):
        if line == "" or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            event_id = int(value)
        elif name == "event":
            event_type = value
        elif name == "data":
            data.append(value)
    if not data:
        return None
    return Event(event_id, event_type, json.loads("\n".join(data)))


def _read_block(stream: Any) -> Operation:
    """The next SSE block (its lines up to a blank one), or None when the stream ended."""
    lines: list[str] = []
    while True:
        line = yield ("readline", stream)
        if line is None:
            return None
        if line == "":
            if lines:
                return "\n".join(lines)
            continue
        lines.append(line)


def outcome_for(session_id: str, message_id: int, e: Event) -> Reply | None:
    """What one event means for the message waited on: its reply, an error raised, or None (not yet)."""
    d = e.data
    in_reply_to = (d.get("inReplyTo") or []) if e.type == "reply" else []
    if message_id in in_reply_to:
        scope = "message" if d.get("scope") == "message" else "turn"
        return Reply(str(d.get("text")), d.get("data"), int(d["messageId"]), list(in_reply_to), scope)
    mine = d.get("messageId") == message_id
    if e.type == "failed" and mine:
        tries = d.get("tries")
        raise BerthError(
            d.get("code") or "SANDBOX_FAILED",
            f"Message {message_id} failed after {tries} {'try' if tries == 1 else 'tries'}: {d.get('error')}",
        )
    if e.type == "interrupted" and mine:
        raise BerthError("TURN_INTERRUPTED", f"Message {message_id}'s turn was interrupted: {d.get('error')}")
    if e.type == "cancelled" and mine:
        raise BerthError("MESSAGE_CANCELLED", f"Message {message_id} was cancelled before it ran")
    if e.type == "held":
        raise BerthError(
            d.get("code") or "SANDBOX_FAILED",
            f"Session {session_id} is held; message {message_id} is kept until an operator acts: {d.get('error')}",
        )
    if e.type == "archived":
        raise BerthError("SESSION_ARCHIVED", f"Session {session_id} was archived before message {message_id} was answered")
    return None


def wait_for_reply(session_id: str, posted: dict, on_event: Callable[[Event], Any] | None) -> Operation:
    """
    Follows the session's events from the post's ``queued`` event until the reply that answers
    the posted message, its failure, or the session being held or archived. A stream that
    breaks (its API process stopped, or died behind a balancer) is followed again from the
    last event seen, for as long as a host answers within RECONNECT_FOR_S.
    """
    message_id = posted["message"]["id"]
    after = int(posted["eventId"])
    lost_since: float | None = None
    while True:
        overflowed = False
        try:
            stream = yield ("open", "GET", f"/v1/sessions/{q(session_id)}/events?after={after}", None, "text/event-stream")
            while True:
                block = yield from _read_block(stream)
                if block is None:
                    break
                e = parse_sse_block(block)
                if e is None:
                    continue
                lost_since = None
                # The server cut a stream this client did not read fast enough: resume where it says.
                if e.type == "overflow":
                    after = int(e.data["lastEventId"])
                    overflowed = True
                    break
                if e.id is not None:
                    after = e.id
                if on_event is not None:
                    on_event(e)
                reply = outcome_for(session_id, message_id, e)
                if reply is not None:
                    return reply
            yield ("close", stream)
        except BerthConnectionError:
            pass
        if overflowed:
            continue
        lost_since = lost_since if lost_since is not None else time.monotonic()
        if time.monotonic() - lost_since > RECONNECT_FOR_S:
            raise BerthConnectionError(
                f"Event stream of session {session_id} ended before the reply, "
                f"and no berth host answered for {RECONNECT_FOR_S:.0f} s"
            )
        yield ("sleep", RECONNECT_PAUSE_S)


def send_and_wait(session_id: str, body: dict, on_event: Callable[[Event], Any] | None) -> Operation:
    posted = yield ("request", "POST", f"/v1/sessions/{q(session_id)}/messages", body)
    return (yield from wait_for_reply(session_id, posted, on_event))


def run_command(
    session_id: str,
    body: dict,
    on_stdout: Callable[[str], Any] | None,
    on_stderr: Callable[[str], Any] | None,
) -> Operation:
    """
    Runs a command in the session's live sandbox, handing each output chunk to its callback
    as it comes. A request refused SANDBOX_UNREACHABLE (the command did not start) is sent
    again with backoff for EXEC_RETRY_S; every other refusal, and an ``error`` line, raises.
    """
    path = f"/v1/sessions/{q(session_id)}/exec"
    deadline = time.monotonic() + EXEC_RETRY_S
    tries = 0
    while True:
        tries += 1
        try:
            stream = yield ("open", "POST", path, body, "application/x-ndjson")
            break
        except BerthError as err:
            wait = min(EXEC_BACKOFF_MAX_S, EXEC_BACKOFF_FIRST_S * 2 ** (tries - 1))
            if err.code != "SANDBOX_UNREACHABLE" or time.monotonic() + wait > deadline:
                raise
            yield ("sleep", wait)
    out = _Output()
    callbacks = {"stdout": (out.stdout, on_stdout), "stderr": (out.stderr, on_stderr)}
    while True:
        text = yield ("readline", stream)
        if text is None:
            raise BerthConnectionError(f"The exec stream of session {session_id} ended before the command's exit")
        if not text.strip():
            continue
        line = json.loads(text)
        kind = line.get("type")
        if kind in callbacks:
            chunks, callback = callbacks[kind]
            chunks.append(line["data"])
            if callback is not None:
                callback(line["data"])
        elif kind == "exit":
            return CommandResult(
                line.get("exitCode"),
                "".join(out.stdout),
                "".join(out.stderr),
                line.get("signal"),
                bool(line.get("timedOut")),
            )
        elif kind == "error":
            raise error_from_exec_line(line)
