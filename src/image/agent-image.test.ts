import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  type AgentImageRecipe,
  agentImageBuildCommand,
  agentImageTag,
  parseHarnesses,
} from './agent-image.js';
import { baseImageRecipe } from './base-image.js';
import { HARNESS_RECIPES } from './harness-recipes.js';

/** The base recipe of a made-up node binary (any file will do: it enters by its hash). */
async function recipe(): Promise<AgentImageRecipe> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-agent-recipe-'));
  await writeFile(join(dir, 'node'), 'not really node');
  const base = await baseImageRecipe(dir, join(dir, 'node'));
  await rm(dir, { recursive: true, force: true });
  return {
    recipeVersion: 1,
    base,
    harnesses: ['claude-code'],
    npm: ['@anthropic-ai/claude-code@2.1.332'],
    apt: [],
  };
}

test('agentImageTag is berth-agent:<12 hex> and changes with the base, the harnesses and every package', async (t) => {
  const RECIPE = await recipe();
  const tag = agentImageTag(RECIPE);
  assert.match(tag, /^berth-agent:[0-9a-f]{12}$/);
  const changed: Array<[string, AgentImageRecipe]> = [
    ['recipe version', { ...RECIPE, recipeVersion: 2 }],
    ['node binary of the base', { ...RECIPE, base: { ...RECIPE.base, nodeSha256: 'b'.repeat(64) } }],
    ['harnesses', { ...RECIPE, harnesses: ['claude-code', 'codex'] }],
    ['an npm version', { ...RECIPE, npm: ['@anthropic-ai/claude-code@2.1.333'] }],
    ['Debian packages', { ...RECIPE, apt: ['git'] }],
  ];
  for (const [name, recipe] of changed) await t.test(name, () => assert.notEqual(agentImageTag(recipe), tag));
  await t.test('the node path of the base', () =>
    assert.equal(agentImageTag({ ...RECIPE, base: { ...RECIPE.base, nodePath: '/opt/node' } }), tag),
  );
});

test('harness names: known ones only, sorted, once; the build command names them', () => {
  assert.deepEqual(parseHarnesses(['codex', 'claude-code', 'codex']), ['claude-code', 'codex']);
  assert.throws(() => parseHarnesses(['gemini']), /Unknown harness gemini/);
  assert.throws(() => parseHarnesses([]), /Unknown harness \(none given\)/);
  assert.equal(
    agentImageBuildCommand(['codex', 'claude-code']),
    'berth image build --with claude-code,codex',
  );
});

test('every harness recipe pins exact npm versions and has an executable for x64 and arm64', () => {
  for (const [name, recipe] of Object.entries(HARNESS_RECIPES)) {
    for (const spec of recipe.npm)
      assert.match(spec, /^(@[a-z0-9-]+\/)?[a-z0-9.-]+@\d+\.\d+\.\d+$/, `${name}: ${spec}`);
    for (const [bin, perArch] of Object.entries(recipe.bins)) {
      assert.ok(perArch.x64 && perArch.arm64, `${name}: ${bin} on both architectures`);
    }
  }
});
