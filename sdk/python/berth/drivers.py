"""
Runs an operation (operations.py) over a transport: `run_sync` blocking, `run_async` as a
coroutine. Each feeds the generator the result of every operation it yields, or throws the
operation's error into it, and closes the streams it opened when the generator ends, how
ever it ends (a reply returned early, an error, a cancelled task).
"""

from __future__ import annotations

from typing import Any

from .operations import Operation
from .transport import AsyncTransport, SyncTransport


def run_sync(transport: SyncTransport, op: Operation) -> Any:
    opened: list = []
    value: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                step = op.throw(error) if error is not None else op.send(value)
            except StopIteration as done:
                return done.value
            value, error = None, None
            try:
                value = getattr(transport, step[0])(*step[1:])
            except Exception as err:  # handed to the operation, which raises it or handles it
                error = err
            if step[0] == "open" and error is None:
                opened.append(value)
    finally:
        op.close()
        for stream in opened:
            transport.close(stream)


async def run_async(transport: AsyncTransport, op: Operation) -> Any:
    opened: list = []
    value: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                step = op.throw(error) if error is not None else op.send(value)
            except StopIteration as done:
                return done.value
            value, error = None, None
            try:
                value = await getattr(transport, step[0])(*step[1:])
            except Exception as err:  # handed to the operation, which raises it or handles it
                error = err
            if step[0] == "open" and error is None:
                opened.append(value)
    finally:
        op.close()
        for stream in opened:
            await transport.close(stream)
