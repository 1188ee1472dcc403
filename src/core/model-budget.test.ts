import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type BudgetDecision,
  type BudgetSnapshot,
  decideModelBudget,
  type ModelBudget,
} from './model-budget.js';

const cases: [string, ModelBudget | undefined, BudgetSnapshot, BudgetDecision['action']][] = [
  ['no budget', undefined, { tokens: 1e9, turns: 1e6, turnCounted: false }, 'allow'],
  ['tokens under', { tokensPerHour: 1000 }, { tokens: 999, turns: 5, turnCounted: false }, 'allow'],
  ['tokens reached', { tokensPerHour: 1000 }, { tokens: 1000, turns: 5, turnCounted: true }, 'refuse'],
  ['turns under', { turnsPerHour: 3 }, { tokens: 0, turns: 2, turnCounted: false }, 'allow'],
  ['turns reached, new turn', { turnsPerHour: 3 }, { tokens: 0, turns: 3, turnCounted: false }, 'refuse'],
  [
    'turns reached, same turn goes on',
    { turnsPerHour: 3 },
    { tokens: 0, turns: 3, turnCounted: true },
    'allow',
  ],
];

for (const [name, budget, used, action] of cases) {
  test(`decideModelBudget: ${name}`, () => {
    const decision = decideModelBudget(budget, used);
    assert.equal(decision.action, action);
    if (decision.action === 'refuse') assert.match(decision.reason, /in the last hour/);
  });
}
