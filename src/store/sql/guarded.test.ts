/**
 * A guarded statement that changes no row is an INTERNAL error naming the row as it was
 * found, and the store tells onWarning. Real engines cannot be made to miss a guard
 * whose row the transition holds locked, so the one faked boundary here is the driver:
 * it answers each statement as a table of canned results.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isBerthError, systemClock } from '../../core/index.js';
import type { StoreChange } from '../store.js';
import { type Op, type OpResult, type Program, runProgramSync, type StatementName } from './program.js';
import { type SqlDriver, SqlStore } from './sql-store.js';

/** A driver whose statements answer from `answers` (a run without an answer changed 1 row). */
function cannedDriver(answers: Partial<Record<StatementName, OpResult>>, ran: Op[]): SqlDriver {
  const execute = (op: Op): OpResult => {
    ran.push(op);
    if (op.statement in answers) return answers[op.statement]!;
    return op.kind === 'run' ? 1 : op.kind === 'all' ? [] : undefined;
  };
  return {
    kind: 'sqlite',
    clock: systemClock,
    async write<T>(program: (changes: StoreChange[]) => Program<T>) {
      const changes: StoreChange[] = [];
      return { value: runProgramSync(program(changes), execute), changes };
    },
    async read<T>(program: () => Program<T>) {
      return runProgramSync(program(), execute);
    },
    async renew<T>(program: () => Program<T>) {
      return runProgramSync(program(), execute);
    },
    listen: () => undefined,
    close: async () => undefined,
  };
}

const RETRY = { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 3 };
const FENCE = { sessionId: 's1', generation: 2, workerId: 'w1' };

test('a guard that matched its row passes; one that matched none is INTERNAL with what was found, told to onWarning', async () => {
  const cases = [
    { name: 'matched', changed: 1, found: undefined, error: null },
    {
      name: 'another holder',
      changed: 0,
      found: { generation: 3, lease_owner: 'w2', sandbox: null, archived_at: null, agent: 'sh' },
      error:
        /^Session s1 is not leased by w1 at generation 2 \(recordSandbox\): RECORD_SANDBOX changed 0 rows; found \{"generation":3,"lease_owner":"w2","sandbox":null,"archived_at":null\}$/,
    },
    { name: 'row gone', changed: 0, found: undefined, error: /RECORD_SANDBOX changed 0 rows; found no row$/ },
  ];
  for (const c of cases) {
    const warnings: unknown[] = [];
    const ran: Op[] = [];
    const driver = cannedDriver({ FENCE: { 1: 1 }, RECORD_SANDBOX: c.changed, SESSION_BY_ID: c.found }, ran);
    const store = new SqlStore(driver, {
      leaseMs: 10_000,
      retry: RETRY,
      onWarning: (_message, err) => warnings.push(err),
    });
    const result = store.recordSandbox(FENCE, 'sbx', 1);
    if (c.error === null) {
      assert.equal(await result, 'ok', c.name);
      assert.deepEqual(warnings, [], c.name);
      continue;
    }
    await assert.rejects(
      result,
      (err: unknown) => isBerthError(err, 'INTERNAL') && c.error.test(err.message),
      c.name,
    );
    assert.equal(warnings.length, 1, `${c.name}: told to onWarning`);
    assert.deepEqual(
      ran.at(-1),
      { kind: 'get', statement: 'SESSION_BY_ID', params: { id: 's1' } },
      `${c.name}: the row re-read`,
    );
  }
});

test('an abort whose message is no longer processing fails whole: the turn is not ended either', async () => {
  const ran: Op[] = [];
  const driver = cannedDriver(
    {
      FENCE: { 1: 1 },
      TURN_BY_ID: { id: 't1', session_id: 's1', status: 'running', generation: 2 },
      PROCESSING_OF_TURN: [
        { id: 7, session_id: 's1', direction: 'in', text: 'x', status: 'processing', tries: 1 },
      ],
      RETRY_MESSAGE: 0,
      MESSAGE_BY_ID: { id: 7, status: 'done', turn_id: 't0', tries: 1 },
    },
    ran,
  );
  const store = new SqlStore(driver, { leaseMs: 10_000, retry: RETRY });
  await assert.rejects(
    store.abortTurn({ ...FENCE, turnId: 't1', code: 'TURN_FAILED', error: 'boom' }, 1),
    (err: unknown) =>
      isBerthError(err, 'INTERNAL') &&
      err.message ===
        'Message 7 is not processing (abortTurn): RETRY_MESSAGE changed 0 rows; found {"status":"done","turn_id":"t0","tries":1}',
  );
  assert.ok(!ran.some((op) => op.statement === 'END_TURN'), 'nothing after the failed guard ran');
});
