"""
The SDK's handling of what a real host rarely does on cue, against a local server speaking
berth's wire protocol (JSON errors, chunked SSE and NDJSON): SANDBOX_UNREACHABLE retried,
SANDBOX_RESTARTED raised typed, an event stream that breaks or overflows followed again
from the last event, cursors followed, a balancer's bare 502. Each case runs on both clients.
"""

import asyncio
import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from berth import AsyncBerth, Berth, BerthConnectionError, BerthError, SandboxRestartedError


class FakeBerth(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # What the scripted routes answer next; reset by each test.
    script: dict = {}
    seen: list = []

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self, content_type, pieces):
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for piece in pieces:
            if piece is None:
                return  # the connection breaks mid-stream: no last chunk
            data = piece.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def handle_one(self):
        length = int(self.headers.get("content-length") or 0)
        self.seen.append((self.command, self.path, self.headers.get("authorization"), self.rfile.read(length)))
        kind, *rest = self.script[self.command, self.path.split("?")[0]].pop(0)
        if kind == "json":
            self.answer(*rest)
        elif kind == "raw":
            self.send_response(rest[0])
            self.send_header("content-length", "0")
            self.end_headers()
        else:
            self.stream(*rest)
        self.close_connection = True

    do_GET = do_POST = handle_one


def sse(event_id, kind, data):
    return f"id: {event_id}\nevent: {kind}\ndata: {json.dumps(data)}\n\n"


class Wire(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ThreadingHTTPServer(("127.0.0.1", 0), FakeBerth)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.url = f"http://127.0.0.1:{cls.server.server_port}"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def each_client(self, script, case):
        """Runs `case(client, run)` on the blocking and the asyncio client, each with `script` answered afresh."""
        for name, client, run in (
            ("sync", Berth(self.url, "tok"), lambda result: result),
            ("async", AsyncBerth(self.url, "tok"), asyncio.run),
        ):
            with self.subTest(name):
                FakeBerth.script = {key: list(answers) for key, answers in script.items()}
                FakeBerth.seen.clear()
                case(client, run)

    def test_exec_retries_sandbox_unreachable_then_raises_sandbox_restarted_typed(self):
        unreachable = ("json", 503, {"error": {"code": "SANDBOX_UNREACHABLE", "message": "worker silent"}})
        lines = [
            json.dumps({"type": "stdout", "data": "partial\n"}) + "\n",
            json.dumps({"type": "error", "code": "SANDBOX_RESTARTED", "message": "ended", "reason": "WorkerLost"}) + "\n",
        ]
        script = {("POST", "/v1/sessions/s1/exec"): [unreachable, unreachable, ("ndjson", "application/x-ndjson", lines)]}

        def case(client, run):
            out = []
            with self.assertRaises(SandboxRestartedError) as caught:
                run(client.commands.run("s1", "make", cwd="src", timeout_ms=5000, on_stdout=out.append))
            self.assertEqual((caught.exception.code, caught.exception.reason), ("SANDBOX_RESTARTED", "WorkerLost"))
            self.assertEqual(out, ["partial\n"])
            self.assertEqual(len(FakeBerth.seen), 3)
            self.assertEqual(json.loads(FakeBerth.seen[0][3]), {"command": "make", "cwd": "src", "timeoutMs": 5000})
            self.assertEqual(FakeBerth.seen[0][2], "Bearer tok")

        self.each_client(script, case)

    def test_exec_refused_otherwise_raises_at_once(self):
        refused = ("json", 409, {"error": {"code": "NO_LIVE_SANDBOX", "message": "none", "hint": "send a message"}})

        def case(client, run):
            with self.assertRaises(BerthError) as caught:
                run(client.commands.run("s1", "ls"))
            err = caught.exception
            self.assertEqual((err.code, err.status, err.hint), ("NO_LIVE_SANDBOX", 409, "send a message"))
            self.assertEqual(len(FakeBerth.seen), 1)

        self.each_client({("POST", "/v1/sessions/s1/exec"): [refused]}, case)

    def test_wait_for_reply_follows_a_broken_and_an_overflowed_stream_from_the_last_event(self):
        posted = {"message": {"id": 7}, "session": {}, "eventId": 3}
        events = ("GET", "/v1/sessions/s1/events")
        script = {
            # Breaks mid-block after event 4; then overflows at 5; then the reply.
            events: [
                ("sse", "text/event-stream", [": keepalive\n\n", sse(4, "started", {"messageId": 7}), "id: 9\nev", None]),
                ("sse", "text/event-stream", [sse(5, "progress", {}), 'event: overflow\ndata: {"lastEventId": 5}\n\n']),
                ("sse", "text/event-stream", [sse(6, "reply", {"text": "done", "messageId": 8, "inReplyTo": [7], "scope": "message"})]),
            ]
        }

        def case(client, run):
            seen = []
            reply = run(client.sessions.wait_for_reply("s1", posted, on_event=lambda e: seen.append(e.type)))
            self.assertEqual((reply.text, reply.message_id, reply.in_reply_to), ("done", 8, [7]))
            self.assertEqual([p for _, p, _, _ in FakeBerth.seen], [
                "/v1/sessions/s1/events?after=3",
                "/v1/sessions/s1/events?after=4",
                "/v1/sessions/s1/events?after=5",
            ])
            self.assertEqual(seen, ["started", "progress", "reply"])

        self.each_client(script, case)

    def test_a_failed_event_raises_its_code(self):
        posted = {"message": {"id": 7}, "session": {}, "eventId": 0}
        failed = sse(2, "failed", {"messageId": 7, "code": "TURN_TIMEOUT", "tries": 1, "error": "too slow"})
        script = {("GET", "/v1/sessions/s1/events"): [("sse", "text/event-stream", [failed])]}

        def case(client, run):
            with self.assertRaises(BerthError) as caught:
                run(client.sessions.wait_for_reply("s1", posted))
            self.assertEqual(caught.exception.code, "TURN_TIMEOUT")

        self.each_client(script, case)

    def test_list_follows_next_and_a_bare_502_is_a_connection_error(self):
        pages = [
            ("json", 200, {"sessions": [{"id": "a"}], "next": "c1"}),
            ("json", 200, {"sessions": [{"id": "b"}], "next": None}),
        ]
        script = {("GET", "/v1/sessions"): pages, ("GET", "/v1/agents"): [("raw", 502)]}

        def case(client, run):
            self.assertEqual([s["id"] for s in run(client.sessions.list(status="running"))], ["a", "b"])
            self.assertEqual(FakeBerth.seen[1][1], "/v1/sessions?status=running&after=c1")
            with self.assertRaises(BerthConnectionError):
                run(client.agents.list())

        self.each_client(script, case)


if __name__ == "__main__":
    unittest.main()
