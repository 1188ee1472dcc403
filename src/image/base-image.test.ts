import assert from 'node:assert/strict';
import { test } from 'node:test';
import { baseImageTag } from './base-image.js';
import type { BaseImageRecipe } from './base-image-recipe.js';

const RECIPE: BaseImageRecipe = {
  recipeVersion: 1,
  suite: 'bookworm',
  variant: 'minbase',
  packages: ['procps'],
  nodePath: '/usr/bin/node',
  nodeSha256: 'a'.repeat(64),
};

test('baseImageTag is berth-base:<12 hex> and changes with every input but the node path', async (t) => {
  const tag = baseImageTag(RECIPE);
  assert.match(tag, /^berth-base:[0-9a-f]{12}$/);
  const changed: Array<[string, BaseImageRecipe]> = [
    ['recipe version', { ...RECIPE, recipeVersion: 2 }],
    ['suite', { ...RECIPE, suite: 'trixie' }],
    ['packages', { ...RECIPE, packages: ['procps', 'curl'] }],
    ['node binary', { ...RECIPE, nodeSha256: 'b'.repeat(64) }],
  ];
  for (const [name, recipe] of changed) {
    await t.test(name, () => assert.notEqual(baseImageTag(recipe), tag));
  }
  await t.test('same binary at another path', () => {
    assert.equal(baseImageTag({ ...RECIPE, nodePath: '/opt/node/bin/node' }), tag);
  });
  await t.test('package order', () => {
    const two = { ...RECIPE, packages: ['procps', 'curl'] };
    assert.equal(baseImageTag({ ...two, packages: ['curl', 'procps'] }), baseImageTag(two));
  });
});
