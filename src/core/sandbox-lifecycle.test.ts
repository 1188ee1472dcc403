/** The sandbox lifecycle: the table is the only way through, its sub-states live here, listeners hear each change, its record says it all. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { testLifecycle } from '../../test/helpers/lifecycle.js';
import { turnRow } from '../../test/helpers/turn-row.js';
import { isBerthError } from './errors.js';
import { canMoveSandbox, SANDBOX_TRANSITIONS, type SandboxPhase } from './sandbox-lifecycle.js';
import { TurnInFlight } from './turn-in-flight.js';

const ROW = turnRow({ id: 't1', generation: 3, sandbox: 'sb', status: 'running', endedAt: null });
const turnOf = () =>
  new TurnInFlight(ROW, {
    turnId: 't1',
    sessionId: 's1',
    generation: 3,
    attempt: 1,
    provider: 'command',
    messages: [],
    limits: { maxOutputBytes: 10, heartbeatIntervalMs: 2000 },
  });

const BINDING = { sessionId: 's1', generation: 3 };

test('sandbox lifecycle: a pooled sandbox from creation to gone, serving two turns', () => {
  const moves: string[] = [];
  const life = testLifecycle('sb', (from, to) => moves.push(`${from}>${to}`), true);
  let changes = 0;
  life.onChange(() => changes++);
  life.warm();
  assert.equal(life.ready, false, 'warm, but its runner is not waiting yet');
  life.runnerWaitsForBind(true);
  assert.equal(life.ready, true);
  life.bind(BINDING);
  assert.equal(life.ready, false, 'bound: no longer ready for another session');
  assert.deepEqual(life.binding, BINDING);
  const first = turnOf();
  life.serve(first);
  assert.equal(life.turn, first);
  assert.equal(life.offeredTurn, first, 'offered until the runner receives it');
  assert.equal(life.record().turnId, 't1');
  life.handOver(first);
  assert.equal(life.offeredTurn, null);
  life.settleTurn(first, { kind: 'committed' });
  assert.deepEqual(first.outcome, { kind: 'committed' });
  life.turnDone();
  assert.equal(life.turn, null, 'the turn in flight goes with the serving phase');
  life.serve(turnOf());
  life.drain({ reason: 'SandboxExited', message: 'sandbox exited (exit code 137)' });
  life.drain({ reason: 'Idle', message: 'a later reason' });
  assert.notEqual(life.turn, null, 'a sandbox ending mid-turn keeps the turn until it is gone');
  assert.equal(life.fence(), true, 'a draining sandbox is still killed hard by a fence');
  assert.equal(life.fence(), false, 'once');
  life.gone();
  assert.deepEqual(moves, [
    'creating>warm',
    'warm>bound',
    'bound>serving',
    'serving>bound',
    'bound>serving',
    'serving>draining',
    'draining>gone',
  ]);
  assert.equal(changes, 11, 'every change but the second drain, which changes nothing');
  const record = life.record();
  assert.deepEqual(
    { ...record, createdAt: 0, updatedAt: 0, endedAt: record.endedAt === null ? null : 0 },
    {
      name: 'sb',
      workerId: 'w1',
      phase: 'gone',
      pooled: true,
      sessionId: 's1',
      generation: 3,
      turnId: null,
      endReason: 'SandboxExited',
      endMessage: 'sandbox exited (exit code 137)',
      createdAt: 0,
      updatedAt: 0,
      endedAt: 0,
    },
    'the first reason stays: it is why the sandbox ended',
  );
});

test('sandbox lifecycle: every move outside the table throws INTERNAL and changes nothing', () => {
  type Move = 'warm' | 'bind' | 'serve' | 'turnDone' | 'drain' | 'gone';
  const into: Record<SandboxPhase, Move> = {
    creating: 'warm',
    warm: 'warm',
    bound: 'bind',
    serving: 'serve',
    draining: 'drain',
    gone: 'gone',
  };
  const apply = (life: ReturnType<typeof testLifecycle>, move: Move) => {
    if (move === 'warm') life.warm();
    else if (move === 'bind') life.bind(BINDING);
    else if (move === 'serve') life.serve(turnOf());
    else if (move === 'turnDone') life.turnDone();
    else if (move === 'drain') life.drain({ reason: 'Idle', message: 'test' });
    else life.gone();
  };
  const path: Record<SandboxPhase, Move[]> = {
    creating: [],
    warm: ['warm'],
    bound: ['bind'],
    serving: ['bind', 'serve'],
    draining: ['drain'],
    gone: ['drain', 'gone'],
  };
  const phases = Object.keys(SANDBOX_TRANSITIONS) as SandboxPhase[];
  let refused = 0;
  for (const from of phases)
    for (const to of phases) {
      // Draining what already ends keeps the first reason (not a move); serving → bound is turnDone.
      const ending = from === 'draining' || from === 'gone';
      if (canMoveSandbox(from, to) || (to === 'draining' && ending) || to === 'creating') continue;
      const life = testLifecycle('sb');
      for (const step of path[from]) apply(life, step);
      assert.throws(
        () => apply(life, to === 'bound' && from === 'serving' ? 'turnDone' : into[to]),
        (err: unknown) => isBerthError(err, 'INTERNAL'),
        `${from} > ${to}`,
      );
      assert.equal(life.phase, from);
      refused++;
    }
  assert.ok(refused >= 15, `${refused} moves refused`);
  const warm = testLifecycle('sb');
  warm.warm();
  assert.throws(() => warm.serve(turnOf()), /cannot move from warm to serving/, 'no turn before the bind');
});

test('sandbox lifecycle: an outcome or hand-over for a turn no longer in flight is ignored', () => {
  const life = testLifecycle('sb');
  life.bind(BINDING);
  const old = turnOf();
  life.serve(old);
  life.turnDone();
  life.settleTurn(old, { kind: 'aborted', code: 'TURN_FAILED', error: 'late' });
  assert.equal(old.outcome, null);
  const next = turnOf();
  life.serve(next);
  life.handOver(old);
  assert.equal(life.offeredTurn, next);
});
