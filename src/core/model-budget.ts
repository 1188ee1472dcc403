/**
 * The per-agent model budget over a sliding hour: pure, so a table test can
 * read it. Checked by the gateway before each upstream call, from the store's totals of
 * the last hour; a call already under way finishes, so concurrent sessions of one agent
 * can overshoot by what their calls in flight spend.
 */

export const BUDGET_WINDOW_MS = 3_600_000;

export interface ModelBudget {
  tokensPerHour?: number;
  turnsPerHour?: number;
}

export interface BudgetSnapshot {
  /** Input + output tokens of the agent's calls in the window. */
  tokens: number;
  /** Distinct turns of the agent with calls in the window. */
  turns: number;
  /** Whether the asking turn is already among them (its further calls do not start a new turn). */
  turnCounted: boolean;
}

export type BudgetDecision = { action: 'allow' } | { action: 'refuse'; reason: string };

export function decideModelBudget(budget: ModelBudget | undefined, used: BudgetSnapshot): BudgetDecision {
  if (budget?.tokensPerHour !== undefined && used.tokens >= budget.tokensPerHour) {
    return {
      action: 'refuse',
      reason: `used ${used.tokens} of its ${budget.tokensPerHour} tokens in the last hour`,
    };
  }
  if (budget?.turnsPerHour !== undefined && !used.turnCounted && used.turns >= budget.turnsPerHour) {
    return {
      action: 'refuse',
      reason: `used ${used.turns} of its ${budget.turnsPerHour} model turns in the last hour`,
    };
  }
  return { action: 'allow' };
}
