/**
 * Model calls redone by the long turns' retries, per fault. Pure.
 *
 * A call is redone when the scripted model (scripted-model.ts) takes a request for a
 * (session, turn, index) it had already answered whole before: berth paid for it twice. A
 * retry resumed from its checkpoint repeats its last call, which the model journal answers
 * without reaching the model, so a fault costs at most the one call whose answer came
 * but was not journalled yet (docs/storage.md, *The journal*). Each redone call is charged
 * to the latest aborted turn of its session that had ended when the call came (the retry
 * that redid it runs after that abort), and each aborted turn of a long session is listed
 * with the fault that explains it (fault-timing.ts), redone calls or none.
 *
 * Invariants: every redone call is either charged to exactly one aborted turn or listed
 * as having none before it; `indices` are in the order the calls came.
 */
import type { Turn } from '../core/index.js';
import type { Fault } from './fault-records.js';
import { faultsInEffectOn, type OutageEvidence } from './fault-timing.js';
import type { ModelCall } from './scripted-model.js';

export interface RedoneCall {
  session: string;
  turn: number;
  index: number;
  at: number;
}

/** An aborted turn of a long session, the fault that explains it, and the calls its retry redid. */
export interface RedoneByFault {
  session: string;
  abortedTurn: string;
  /** The fault in effect on it when it was aborted; null when none explains it. */
  fault: { kind: Fault['kind']; at: number } | null;
  /** The call indices redone after it (the workload's call index: 0 is the turn's first call). */
  indices: number[];
}

export interface RedoneCalls {
  perFault: RedoneByFault[];
  /** Calls redone in a session before any turn of it was aborted: no fault can explain them. */
  unattributed: RedoneCall[];
}

/** The calls a key already answered whole when they came, in arrival order. */
export function redoneCalls(calls: ModelCall[]): RedoneCall[] {
  const answeredAt = new Map<string, number>();
  const redone: RedoneCall[] = [];
  for (const c of [...calls].sort((a, b) => a.receivedAt - b.receivedAt)) {
    if (c.session === '') continue;
    const key = JSON.stringify([c.session, c.turn, c.index]);
    const first = answeredAt.get(key);
    if (first !== undefined && first <= c.receivedAt)
      redone.push({ session: c.session, turn: c.turn, index: c.index, at: c.receivedAt });
    if (c.answeredAt !== null && (first === undefined || c.answeredAt < first))
      answeredAt.set(key, c.answeredAt);
  }
  return redone;
}

/** The redone calls charged to the aborted turns of `longTurns` (the long sessions' turns). */
export function redoneByFault(
  calls: ModelCall[],
  longTurns: Turn[],
  faults: Fault[],
  evidence: OutageEvidence,
): RedoneCalls {
  const aborted = longTurns
    .filter((t) => t.status === 'aborted' && t.endedAt !== null)
    .sort((a, b) => a.endedAt! - b.endedAt!);
  const perTurn = new Map<string, RedoneByFault>(
    aborted.map((t) => {
      const fault = faultsInEffectOn(t, faults, evidence)[0];
      return [
        t.id,
        {
          session: t.sessionId,
          abortedTurn: t.id,
          fault: fault ? { kind: fault.kind, at: fault.at } : null,
          indices: [],
        },
      ];
    }),
  );
  const unattributed: RedoneCall[] = [];
  for (const r of redoneCalls(calls)) {
    const before = aborted.filter((t) => t.sessionId === r.session && t.endedAt! <= r.at).at(-1);
    if (before) perTurn.get(before.id)!.indices.push(r.index);
    else unattributed.push(r);
  }
  return { perFault: [...perTurn.values()], unattributed };
}
