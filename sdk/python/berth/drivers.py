"""
Runs an operation (operations.py) over a transport. One driver, a coroutine: it feeds the
generator the result of every operation it yields, or throws the operation's error into
it, and closes the streams it opened when the generator ends, how ever it ends (a reply
returned early, an error, a cancelled task). `run_async` is that coroutine; `run_sync`
runs it to its end in one step, with no event loop: the blocking transport's coroutines
never suspend (they block instead), so the sync client works inside a running loop too.
"""

from __future__ import annotations

from typing import Any

from .operations import Operation


async def run_async(transport: Any, op: Operation) -> Any:
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


def run_sync(transport: Any, op: Operation) -> Any:
    coroutine = run_async(transport, op)
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the blocking transport suspended: it must block, never await")
