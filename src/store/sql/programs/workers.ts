/** Worker rows: registered at start, renewed every leaseMs / 5, removed at a clean stop (the sweep deletes long-dead ones, leases.ts). */
import type { WorkerRegistration, WorkerRow } from '../../../core/index.js';
import { all, get, type Program, run } from '../program.js';
import { toWorker } from '../rows.js';

export function* registerWorker(row: WorkerRegistration): Program<void> {
  const { control, ...rest } = row;
  yield* run('UPSERT_WORKER', {
    ...rest,
    controlUrl: control?.url ?? null,
    controlKey: control?.key ?? null,
  });
}

/** false when the row is gone: the worker must fence itself. */
export function* renewWorker(workerId: string, now: number): Program<boolean> {
  return (yield* run('RENEW_WORKER', { id: workerId, now })) === 1;
}

/** Its row goes; while it still holds leases (a release failed) the row stays, expired, for the sweep. */
export function* removeWorker(workerId: string): Program<void> {
  if ((yield* run('DELETE_WORKER', { id: workerId })) === 0) yield* run('EXPIRE_WORKER', { id: workerId });
}

/** false when there is no such worker. */
export function* drainWorker(workerId: string, now: number): Program<boolean> {
  return (yield* run('DRAIN_WORKER', { id: workerId, now })) === 1;
}

export function* getWorker(workerId: string): Program<WorkerRow | null> {
  const row = yield* get('WORKER_BY_ID', { id: workerId });
  return row ? toWorker(row) : null;
}

export function* liveSlots(now: number, leaseMs: number): Program<number> {
  return Number((yield* get('LIVE_SLOTS', { staleBefore: now - leaseMs }))!.slots);
}

export function* listWorkers(): Program<WorkerRow[]> {
  return (yield* all('ALL_WORKERS', {})).map(toWorker);
}
