/** Model usage: one row per upstream call that answered, summed for budgets and a turn's usage. */
import type { ModelUsageEntry, ModelUsageTotals } from '../../store.js';
import { get, type Program, run } from '../program.js';

export function* recordModelUsage(entry: ModelUsageEntry, now: number): Program<void> {
  yield* run('INSERT_MODEL_USAGE', { ...entry, now });
}

export function* sumModelUsage(filter: {
  agent?: string;
  turnId?: string;
  since?: number;
}): Program<ModelUsageTotals> {
  const r = (yield* get('SUM_MODEL_USAGE', {
    agent: filter.agent ?? null,
    turnId: filter.turnId ?? null,
    since: filter.since ?? null,
  }))!;
  return {
    calls: Number(r.calls),
    inputTokens: Number(r.input_tokens),
    outputTokens: Number(r.output_tokens),
    turns: Number(r.turns),
  };
}
