"""
The two transports the driver runs operations on, with the same coroutine methods:
blocking (http.client; its coroutines block and never suspend) and asyncio
(asyncio.open_connection, HTTP/1.1 written and read here: the standard library has no
asyncio HTTP client). Both send the bearer token, turn an API error answer into its
BerthError and a host that does not answer into BerthConnectionError naming the URL.
A stream is one response read line by line (SSE and NDJSON); each request has its own
connection, closed with its response.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

from .errors import BerthConnectionError, BerthError, error_from_response

# A plain request (not a stream) that gets no answer for this long is a host that does not answer.
REQUEST_TIMEOUT_S = 60.0


class _Target:
    """Where the API is: scheme, host, port and path prefix from the base URL, and the headers every request sends."""

    def __init__(self, url: str, token: str | None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BerthError(
                "CONFIG_INVALID",
                f"BERTH_URL {url!r} is not an http(s) URL",
                hint="Set BERTH_URL (or Berth(url=...)) to where the API listens, e.g. http://127.0.0.1:7420",
            )
        self.url = url
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.token = token

    def headers(self, body: bytes | None, accept: str) -> dict[str, str]:
        host = f"[{self.host}]" if ":" in self.host else self.host
        h = {"Accept": accept, "Host": f"{host}:{self.port}"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            h["Content-Type"] = "application/json"
        h["Content-Length"] = str(len(body or b""))
        return h

    def unreachable(self, err: BaseException) -> BerthConnectionError:
        return BerthConnectionError(f"No berth host answers at {self.url} (BERTH_URL): {err}")

    def broken(self, err: BaseException) -> BerthConnectionError:
        return BerthConnectionError(f"The connection to {self.url} broke mid-stream: {err}")


def _encode(body: Any) -> bytes | None:
    return None if body is None else json.dumps(body).encode("utf-8")


def _decode(data: bytes) -> Any:
    return json.loads(data.decode("utf-8")) if data else None


class _SyncStream:
    """A response and the connection it came on: closing it closes both."""

    def __init__(self, conn: http.client.HTTPConnection, res: http.client.HTTPResponse):
        self.conn = conn
        self.res = res

    def close(self) -> None:
        self.res.close()
        self.conn.close()


class SyncTransport:
    """Blocking: its coroutines never suspend (drivers.run_sync runs them without an event loop)."""

    def __init__(self, url: str, token: str | None):
        self.target = _Target(url, token)

    def _send(self, method: str, path: str, body: Any, accept: str, timeout: float | None) -> _SyncStream:
        t = self.target
        data = _encode(body)
        conn_type = http.client.HTTPSConnection if t.tls else http.client.HTTPConnection
        conn = conn_type(t.host, t.port, timeout=timeout)
        try:
            conn.request(method, t.prefix + path, body=data, headers=t.headers(data, accept))
            stream = _SyncStream(conn, conn.getresponse())
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            raise t.unreachable(err) from err
        if stream.res.status >= 400:
            try:
                raise error_from_response(stream.res.status, stream.res.read())
            finally:
                stream.close()
        return stream

    async def request(self, method: str, path: str, body: Any) -> Any:
        stream = self._send(method, path, body, "application/json", REQUEST_TIMEOUT_S)
        try:
            return _decode(stream.res.read())
        except (OSError, http.client.HTTPException) as err:
            raise self.target.broken(err) from err
        finally:
            stream.close()

    async def open(self, method: str, path: str, body: Any, accept: str) -> _SyncStream:
        # No timeout: an event stream is quiet between events (the server sends a keepalive).
        return self._send(method, path, body, accept, None)

    async def readline(self, stream: _SyncStream) -> str | None:
        try:
            line = stream.res.readline()
        except (OSError, http.client.HTTPException) as err:
            raise self.target.broken(err) from err
        if not line:
            return None
        return line.decode("utf-8").rstrip("\r\n")

    async def close(self, stream: _SyncStream) -> None:
        stream.close()

    async def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _AsyncResponse:
    """A response body read from an asyncio stream: Content-Length, chunked, or up to the end."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]):
        self.reader = reader
        self.writer = writer
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self.remaining = int(length) if length is not None and not self.chunked else None
        self.buffer = b""
        self.done = False

    async def _next(self) -> bytes:
        """The next piece of the body; b"" at its end."""
        if self.done:
            return b""
        if self.chunked:
            size_line = await self.reader.readline()
            if not size_line:
                raise ConnectionResetError("the host closed the connection before the body's last chunk")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                # Trailers, up to the blank line.
                while (await self.reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                self.done = True
                return b""
            data = await self.reader.readexactly(size)
            await self.reader.readline()
            return data
        if self.remaining is not None:
            data = await self.reader.read(min(self.remaining, 65536)) if self.remaining else b""
            if self.remaining and not data:
                raise ConnectionResetError("the host closed the connection before the body's end")
            self.remaining -= len(data)
        else:
            data = await self.reader.read(65536)
        self.done = not data or self.remaining == 0
        return data

    async def read_all(self) -> bytes:
        parts = [self.buffer]
        while piece := await self._next():
            parts.append(piece)
        self.buffer = b""
        return b"".join(parts)

    async def readline(self) -> bytes | None:
        while b"\n" not in self.buffer:
            piece = await self._next()
            if not piece:
                rest, self.buffer = self.buffer, b""
                return rest or None
            self.buffer += piece
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def close(self) -> None:
        self.writer.close()


class AsyncTransport:
    def __init__(self, url: str, token: str | None):
        self.target = _Target(url, token)

    async def _send(self, method: str, path: str, body: Any, accept: str) -> _AsyncResponse:
        t = self.target
        data = _encode(body)
        try:
            reader, writer = await asyncio.open_connection(
                t.host, t.port, ssl=ssl.create_default_context() if t.tls else None
            )
        except OSError as err:
            raise t.unreachable(err) from err
        try:
            head = [f"{method} {t.prefix + path} HTTP/1.1"]
            head += [f"{k}: {v}" for k, v in t.headers(data, accept).items()]
            head.append("Connection: close")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (data or b""))
            await writer.drain()
            status_line = await reader.readline()
            if not status_line:
                raise ConnectionResetError("the host closed the connection without an answer")
            status = int(status_line.split()[1])
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            res = _AsyncResponse(reader, writer, headers)
            if status >= 400:
                raise error_from_response(status, await res.read_all())
            return res
        except BaseException as err:
            writer.close()
            if isinstance(err, (OSError, asyncio.IncompleteReadError, ValueError, IndexError)):
                raise t.unreachable(err) from err
            raise

    async def request(self, method: str, path: str, body: Any) -> Any:
        res = await asyncio.wait_for(self._send(method, path, body, "application/json"), REQUEST_TIMEOUT_S)
        try:
            return _decode(await asyncio.wait_for(res.read_all(), REQUEST_TIMEOUT_S))
        except (OSError, asyncio.IncompleteReadError) as err:
            raise self.target.broken(err) from err
        finally:
            res.close()

    async def open(self, method: str, path: str, body: Any, accept: str) -> _AsyncResponse:
        return await self._send(method, path, body, accept)

    async def readline(self, res: _AsyncResponse) -> str | None:
        try:
            line = await res.readline()
        except (OSError, asyncio.IncompleteReadError, ValueError) as err:
            raise self.target.broken(err) from err
        return None if line is None else line.decode("utf-8").rstrip("\r")

    async def close(self, res: _AsyncResponse) -> None:
        res.close()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
