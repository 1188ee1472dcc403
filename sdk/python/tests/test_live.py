"""
The SDK against a real berth host (test/python-sdk.docker.test.ts starts it and runs this
with BERTH_URL, BERTH_TOKEN of tenant "py" and BERTH_OTHER_TOKEN of tenant "py-other").
The host runs turns once (BERTH_MAX_TRIES=1), so a failing turn fails at once.
"""

import asyncio
import os
import unittest

from berth import AsyncBerth, Berth, BerthConnectionError, BerthError


def setUpModule():
    berth = Berth()
    berth.agents.create("py-sh")
    berth.agents.create("py-script", provider="script")
    berth.agents.create("py-res", mode="resident")


class SyncClient(unittest.TestCase):
    def setUp(self):
        self.berth = Berth()

    def test_agents_create_get_list(self):
        agent = self.berth.agents.get("py-sh")
        self.assertEqual((agent["provider"], agent["tenant"]), ("command", "py"))
        self.assertIn("py-res", [a["name"] for a in self.berth.agents.list()])
        with self.assertRaises(BerthError) as caught:
            self.berth.agents.create("py-sh")
        self.assertEqual((caught.exception.code, caught.exception.status), ("AGENT_EXISTS", 409))

    def test_send_and_wait_returns_the_reply_and_the_session_lists(self):
        seen = []
        reply = self.berth.sessions.send_and_wait(
            "py1", "echo hello from python", agent="py-sh", on_event=lambda e: seen.append(e.type)
        )
        self.assertEqual(reply.text, "hello from python\n")
        self.assertEqual(reply.scope, "message")
        self.assertIn("started", seen)
        self.assertEqual(self.berth.sessions.get("py1")["lastReply"]["text"], "hello from python\n")
        self.assertIn("py1", [s["id"] for s in self.berth.sessions.list(agent="py-sh")])
        posted = self.berth.sessions.send("py1", "echo again")
        self.assertEqual(self.berth.sessions.wait_for_reply("py1", posted).in_reply_to, [posted["message"]["id"]])
        with self.assertRaises(BerthError) as caught:
            self.berth.sessions.interrupt("py1")
        self.assertEqual(caught.exception.code, "NO_RUNNING_TURN")

    def test_a_failing_turn_raises_its_code(self):
        with self.assertRaises(BerthError) as caught:
            self.berth.sessions.send_and_wait("py-fail", '{"steps": [{"run": "exit 3"}]}', agent="py-script")
        self.assertEqual(caught.exception.code, "STEP_FAILED")

    def test_another_tenants_session_is_not_found(self):
        self.berth.sessions.send_and_wait("py-mine", "true", agent="py-sh")
        other = Berth(token=os.environ["BERTH_OTHER_TOKEN"])
        with self.assertRaises(BerthError) as caught:
            other.sessions.get("py-mine")
        self.assertEqual((caught.exception.code, caught.exception.status), ("SESSION_NOT_FOUND", 404))
        with self.assertRaises(BerthError) as caught:
            other.commands.run("py-mine", "true")
        self.assertEqual(caught.exception.code, "SESSION_NOT_FOUND")

    def test_commands_run_streams_to_callbacks_and_returns_the_exit_code(self):
        self.berth.sessions.send_and_wait("py-res1", "echo ready > f.txt", agent="py-res")
        out, err = [], []
        result = self.berth.commands.run(
            "py-res1",
            'cat f.txt; echo "$GREETING" >&2; exit 3',
            env={"GREETING": "hi"},
            on_stdout=out.append,
            on_stderr=err.append,
        )
        self.assertEqual((result.exit_code, result.stdout, result.stderr), (3, "ready\n", "hi\n"))
        self.assertEqual(("".join(out), "".join(err)), ("ready\n", "hi\n"))

    def test_no_host_is_a_connection_error_naming_berth_url(self):
        with self.assertRaises(BerthConnectionError) as caught:
            Berth(url="http://127.0.0.1:9").agents.list()
        self.assertEqual(caught.exception.code, "HOST_UNREACHABLE")
        self.assertIn("BERTH_URL", str(caught.exception))


class AsyncClient(unittest.IsolatedAsyncioTestCase):
    async def test_send_and_wait_and_commands_run(self):
        berth = AsyncBerth()
        replies = await asyncio.gather(
            berth.sessions.send_and_wait("py-async1", "echo one", agent="py-sh"),
            berth.sessions.send_and_wait("py-async-res", "echo two > f.txt", agent="py-res"),
        )
        self.assertEqual(replies[0].text, "one\n")
        out = []
        result = await berth.commands.run("py-async-res", "cat f.txt; exit 4", on_stdout=out.append)
        self.assertEqual((result.exit_code, result.stdout, "".join(out)), (4, "two\n", "two\n"))
        with self.assertRaises(BerthError) as caught:
            await AsyncBerth(token=os.environ["BERTH_OTHER_TOKEN"]).sessions.get("py-async1")
        self.assertEqual(caught.exception.code, "SESSION_NOT_FOUND")


if __name__ == "__main__":
    unittest.main()
