/** The sandbox lifecycle: the table is the only way through, the turn in flight lives here, listeners hear each change. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { turnRow } from '../../test/helpers/turn-row.js';
import { isBerthError } from './errors.js';
import {
  canMoveSandbox,
  SANDBOX_TRANSITIONS,
  SandboxLifecycle,
  type SandboxPhase,
} from './sandbox-lifecycle.js';
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

test('sandbox lifecycle: a pooled sandbox from creation to gone, serving two turns', () => {
  const moves: string[] = [];
  const life = new SandboxLifecycle('sb', (from, to) => moves.push(`${from}>${to}`));
  let changes = 0;
  life.onChange(() => changes++);
  life.moveTo('warm', 'started unbound');
  life.moveTo('bound', 'session s1');
  const first = turnOf();
  life.serve(first);
  assert.equal(life.turn, first);
  life.settleTurn(first, { kind: 'committed' });
  assert.deepEqual(first.outcome, { kind: 'committed' });
  life.moveTo('bound', 'committed');
  assert.equal(life.turn, null, 'the turn in flight goes with the serving phase');
  life.serve(turnOf());
  life.moveTo('draining', 'sandbox exited');
  assert.notEqual(life.turn, null, 'a sandbox ending mid-turn keeps the turn until it is gone');
  life.moveTo('gone', 'killed');
  assert.deepEqual(moves, [
    'creating>warm',
    'warm>bound',
    'bound>serving',
    'serving>bound',
    'bound>serving',
    'serving>draining',
    'draining>gone',
  ]);
  assert.equal(changes, 8);
});

test('sandbox lifecycle: every move outside the table throws INTERNAL and changes nothing', () => {
  const phases = Object.keys(SANDBOX_TRANSITIONS) as SandboxPhase[];
  for (const from of phases)
    for (const to of phases) {
      if (canMoveSandbox(from, to) || to === 'serving' || from === 'serving') continue;
      const life = new SandboxLifecycle('sb');
      const path: Record<SandboxPhase, Exclude<SandboxPhase, 'serving'>[]> = {
        creating: [],
        warm: ['warm'],
        bound: ['bound'],
        serving: [],
        draining: ['draining'],
        gone: ['draining', 'gone'],
      };
      for (const step of path[from]) life.moveTo(step, 'set-up');
      assert.throws(
        () => life.moveTo(to as Exclude<SandboxPhase, 'serving'>, 'test'),
        (err: unknown) => isBerthError(err, 'INTERNAL'),
        `${from} > ${to}`,
      );
      assert.equal(life.phase, from);
    }
  const warm = new SandboxLifecycle('sb');
  warm.moveTo('warm', 'started');
  assert.throws(() => warm.serve(turnOf()), /cannot move from warm to serving/, 'no turn before the bind');
});

test('sandbox lifecycle: an outcome for a turn no longer in flight is ignored', () => {
  const life = new SandboxLifecycle('sb');
  life.moveTo('bound', 'cold start');
  const old = turnOf();
  life.serve(old);
  life.moveTo('bound', 'committed');
  life.settleTurn(old, { kind: 'aborted', code: 'TURN_FAILED', error: 'late' });
  assert.equal(old.outcome, null);
});
