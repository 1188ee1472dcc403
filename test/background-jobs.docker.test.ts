/**
 * Jobs that leave processes running, in real sandboxes: a `command` job ends when its main
 * process exits even when a background process holds its output (`(tail -f /dev/null &)`,
 * `sleep 1000 &`), its reply carries the output and names what was left and what becomes
 * of it; an ephemeral agent's next turn finds none of it, a resident agent's finds all of
 * it still running (a writer to the old output included). A background process that
 * redirects its output works as it always did. Every turn commits on its first try: none
 * waits for a turn timeout.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CommandResult } from '../src/core/index.js';
import { startTestHost } from './helpers/test-host.js';

const reply = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';
/** What the check job prints for each process still alive. */
const CHECK = [
  'for p in "tail -f /dev/null" "sleep 1000" "sleep 1001" "sh -c while"; do',
  '  pgrep -f "^$p" > /dev/null && echo "alive: $p"',
  'done; true',
].join('\n');

for (const mode of ['ephemeral', 'resident'] as const) {
  test(`${mode}: a job ends when its main process exits; what it left is named, then ${mode === 'resident' ? 'kept' : 'killed with the turn'}`, async (t) => {
    const { host, client, sendAndCollect } = await startTestHost(t);
    await client.request('POST', '/v1/agents', {
      name: 'sh',
      provider: 'command',
      ...(mode === 'resident' ? { mode: 'resident' } : {}),
    });
    const job = async (text: string) => {
      const events = await sendAndCollect('b1', { agent: 'sh', text }, reply);
      const last = events.at(-1)!;
      assert.equal(last.type, 'reply', JSON.stringify(events));
      return { text: last.data.text as string, result: last.data.data as CommandResult };
    };
    const fate = mode === 'resident' ? 'kept-resident' : 'killed-at-turn-end';

    const tail = await job('(tail -f /dev/null &); echo hi');
    assert.equal(tail.text, 'hi\n');
    assert.equal(tail.result.exitCode, 0);
    assert.deepEqual(
      tail.result.leftRunning?.processes.map((p) => p.command),
      ['tail -f /dev/null'],
    );
    assert.equal(tail.result.leftRunning?.fate, fate);

    const sleep = await job('sleep 1000 & echo started');
    assert.equal(sleep.text, 'started\n');
    assert.deepEqual(
      sleep.result.leftRunning?.processes.map((p) => p.command),
      ['sleep 1000'],
    );

    // Redirected, as before: the job ends with its shell; the process is still named.
    const redirected = await job('sleep 1001 > /dev/null 2>&1 & echo $!');
    assert.equal(redirected.result.exitCode, 0);
    assert.deepEqual(redirected.result.leftRunning?.processes, [
      { pid: Number(redirected.text), command: 'sleep 1001' },
    ]);

    // A process that goes on writing to the output of a job that has ended.
    const writer = await job("sh -c 'while :; do echo tick; sleep 0.1; done' & echo writing");
    assert.match(
      writer.text,
      /^(tick\n)*writing\n(tick\n)*$/,
      'what it wrote in the grace is part of the reply',
    );
    assert.equal(writer.result.leftRunning?.fate, fate);

    const check = await job(CHECK);
    assert.equal(
      check.text,
      mode === 'resident'
        ? 'alive: tail -f /dev/null\nalive: sleep 1000\nalive: sleep 1001\nalive: sh -c while\n'
        : '',
    );
    assert.equal(check.result.leftRunning, undefined, 'the check itself left nothing');

    const turns = await host.store.listTurns('b1');
    assert.equal(turns.length, 5);
    assert.ok(
      turns.every((x) => x.status === 'committed' && x.attempt === 1),
      JSON.stringify(turns.map((x) => [x.status, x.attempt, x.error])),
    );
  });
}
