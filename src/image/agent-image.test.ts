import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { agentImageNeeds, agentSpecSchema } from '../core/index.js';
import {
  type AgentImageRecipe,
  agentImageBuildCommand,
  agentImageRecipe,
  agentImageTag,
  imageLacks,
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
    packages: [],
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
    ["the agent's npm packages", { ...RECIPE, packages: ['left-pad@1.3.0'] }],
    ["an agent npm package's version", { ...RECIPE, packages: ['left-pad@1.3.1'] }],
  ];
  const tags = changed.map(([, recipe]) => agentImageTag(recipe));
  assert.equal(new Set([tag, ...tags]).size, changed.length + 1, 'every change gives its own tag');
  for (const [name, recipe] of changed) await t.test(name, () => assert.notEqual(agentImageTag(recipe), tag));
  await t.test('the node path of the base', () =>
    assert.equal(agentImageTag({ ...RECIPE, base: { ...RECIPE.base, nodePath: '/opt/node' } }), tag),
  );
});

test('the tag of a recipe without agent npm packages is what it was before they existed (images already built keep it)', () => {
  const base = {
    recipeVersion: 1,
    suite: 'bookworm',
    variant: 'minbase' as const,
    packages: ['procps'],
    nodePath: '/x',
    nodeSha256: 'a'.repeat(64),
  };
  const opencode = { recipeVersion: 1, base, harnesses: ['opencode' as const], npm: ['opencode-ai@1.18.33'] };
  assert.equal(agentImageTag({ ...opencode, apt: ['ripgrep'], packages: [] }), 'berth-agent:0eb0b1d3dbe5');
});

test('an agent recipe is the same whatever the order and repetition of its packages', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-agent-recipe-'));
  const a = await agentImageRecipe(dir, {
    harnesses: ['codex'],
    apt: ['jq', 'git', 'jq'],
    npm: ['b@1.0.0', 'a@2.0.0'],
  });
  const b = await agentImageRecipe(dir, {
    harnesses: ['codex', 'codex'],
    apt: ['git', 'jq'],
    npm: ['a@2.0.0', 'b@1.0.0'],
  });
  await rm(dir, { recursive: true, force: true });
  assert.equal(agentImageTag(a), agentImageTag(b));
  assert.deepEqual(a.apt, ['git', 'jq']);
  assert.deepEqual(a.packages, ['a@2.0.0', 'b@1.0.0']);
  assert.deepEqual(a.npm, ['@openai/codex@0.171.0'], "the harness's npm packages apart from the agent's");
});

test('an agent recipe refuses unknown harnesses, bad Debian names, unpinned npm packages and nothing at all', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-agent-recipe-'));
  const refused = async (wants: Parameters<typeof agentImageRecipe>[1], why: RegExp) =>
    assert.rejects(agentImageRecipe(dir, wants), (err: { code?: string; message?: string }) => {
      assert.equal(err.code, 'INVALID_INPUT');
      assert.match(String(err.message), why);
      return true;
    });
  await refused({ harnesses: ['gemini'] }, /Unknown harness gemini/);
  await refused({ apt: ['--force-yes'] }, /--force-yes is not a Debian package name/);
  await refused(
    { npm: ['typescript'] },
    /typescript names no version: pin an exact version, e.g. typescript@1\.2\.3/,
  );
  await refused({ npm: ['typescript@^5'] }, /"\^5" is a range or a tag, not a version/);
  await refused({}, /give --with, --apt or --npm/);
  await rm(dir, { recursive: true, force: true });
});

test('harness names: known ones only, sorted, once; the build command names harnesses and packages', () => {
  assert.deepEqual(parseHarnesses(['codex', 'claude-code', 'codex']), ['claude-code', 'codex']);
  assert.deepEqual(parseHarnesses([]), []);
  assert.throws(() => parseHarnesses(['gemini']), /Unknown harness gemini/);
  const needs = (harnesses: string[], apt: string[], npm: string[]) =>
    ({ harnesses, apt, npm }) as Parameters<typeof agentImageBuildCommand>[0];
  assert.equal(
    agentImageBuildCommand(needs(['codex', 'claude-code'], [], [])),
    'berth image build --with claude-code,codex',
  );
  assert.equal(
    agentImageBuildCommand(needs([], ['jq', 'git'], ['semver@7.6.3'])),
    'berth image build --apt git,jq --npm semver@7.6.3',
  );
});

test("an agent's image needs: its provider's harness and its packages; none for a plain agent", () => {
  const spec = (fields: Record<string, unknown>) =>
    agentSpecSchema.parse({ name: 'a', model: 'm', ...fields });
  const cases: Array<[string, Record<string, unknown>, ReturnType<typeof agentImageNeeds>]> = [
    ['command agent, no packages: the base image', { provider: 'command' }, null],
    ['anthropic agent, no packages', { provider: 'anthropic' }, null],
    ['harness agent', { provider: 'codex' }, { harnesses: ['codex'], apt: [], npm: [] }],
    [
      'command agent with packages',
      { provider: 'command', packages: { apt: ['jq'], npm: ['semver@7.6.3'] } },
      { harnesses: [], apt: ['jq'], npm: ['semver@7.6.3'] },
    ],
    [
      'harness agent with packages',
      { provider: 'claude-code', packages: { npm: ['typescript@5.6.3'] } },
      { harnesses: ['claude-code'], apt: [], npm: ['typescript@5.6.3'] },
    ],
    ['empty package lists', { provider: 'script', packages: { apt: [], npm: [] } }, null],
  ];
  for (const [name, fields, needs] of cases) assert.deepEqual(agentImageNeeds(spec(fields)), needs, name);
});

test('what an image lacks: each need it does not hold, every need when it does not exist', () => {
  const needs = { harnesses: ['codex' as const], apt: ['jq'], npm: ['semver@7.6.3'] };
  assert.deepEqual(
    imageLacks({ harnesses: ['codex'], apt: ['jq', 'git'], npm: ['semver@7.6.3'] }, needs),
    [],
  );
  assert.deepEqual(imageLacks({ harnesses: ['codex'], apt: [], npm: ['semver@7.6.2'] }, needs), [
    'Debian package jq',
    'npm package semver@7.6.3',
  ]);
  assert.deepEqual(imageLacks(null, needs), [
    'harness codex',
    'Debian package jq',
    'npm package semver@7.6.3',
  ]);
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
