/**
 * An agent's own packages, built into its agent image for real (debootstrap from Debian's
 * mirror, npm packages from the npm registry) and used by its sandboxes: a `command` agent
 * with Debian's jq and npm's semver runs both, and `require` finds the npm package. An
 * agent is refused at create when its npm packages are not pinned, or when its image is
 * not built (with the command that builds it); one without packages keeps the host's image,
 * and a change of its packages moves it to the image of its new recipe and back.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { baseImageRecipe, baseImageTag, ensureAgentImage } from '../src/image/index.js';
import { startTestHost, waitPromoted } from './helpers/test-host.js';

const CACHE_DIR = join(process.cwd(), '.berth', 'cache');
const PACKAGES = { apt: ['jq'], npm: ['semver@7.6.3'] };
/** A valid Debian name no image is ever built with (a build would fail: Debian has no such package). */
const NEVER_BUILT = 'berth-never-built';
const done = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';

type Refusal = { code?: string; message?: string; hint?: string };
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (err: Refusal) => err,
  );

test('an npm package without an exact version is refused at create, saying what is wrong and how to pin it', async (t) => {
  const { client } = await startTestHost(t);
  for (const [spec, why] of [
    [
      'typescript',
      /packages\.npm\.0: typescript names no version: pin an exact version, e\.g\. typescript@1\.2\.3/,
    ],
    [
      'typescript@^5',
      /packages\.npm\.0: typescript@\^5: "\^5" is a range or a tag, not a version: pin an exact version/,
    ],
  ] as const) {
    const err = await refusal(
      client.request('POST', '/v1/agents', { name: 'u', provider: 'command', packages: { npm: [spec] } }),
    );
    assert.equal(err?.code, 'INVALID_INPUT', spec);
    assert.match(String(err?.message), why);
  }
  const bad = await refusal(
    client.request('POST', '/v1/agents', { name: 'u', provider: 'command', packages: { apt: ['-y'] } }),
  );
  assert.equal(bad?.code, 'INVALID_INPUT');
  assert.match(String(bad?.message), /packages\.apt\.0: -y is not a Debian package name/);
});

test('an agent whose packages are not in a built image is refused at create with the command that builds it', async (t) => {
  const { client } = await startTestHost(t);
  const command = await refusal(
    client.request('POST', '/v1/agents', {
      name: 'p',
      provider: 'command',
      packages: { apt: [NEVER_BUILT, 'jq'], npm: ['semver@7.6.3'] },
    }),
  );
  assert.equal(command?.code, 'AGENT_IMAGE_MISSING', JSON.stringify(command));
  assert.match(
    String(command?.message),
    /^Image berth-agent:[0-9a-f]{12} of agent p does not exist on this host/,
  );
  assert.equal(command?.hint, `Build it: berth image build --apt ${NEVER_BUILT},jq --npm semver@7.6.3`);
  const harness = await refusal(
    client.request('POST', '/v1/agents', {
      name: 'h',
      provider: 'codex',
      model: 'gpt-5-codex',
      packages: { apt: [NEVER_BUILT] },
    }),
  );
  assert.equal(harness?.code, 'AGENT_IMAGE_MISSING');
  assert.equal(harness?.hint, `Build it: berth image build --with codex --apt ${NEVER_BUILT}`);
  const named = await refusal(
    client.request('POST', '/v1/agents', {
      name: 'n',
      provider: 'command',
      image: baseImageTag(await baseImageRecipe(CACHE_DIR)),
      packages: { apt: ['jq'] },
    }),
  );
  assert.equal(named?.code, 'AGENT_IMAGE_MISSING', 'a named image without the packages is refused too');
  assert.match(String(named?.message), /of agent n does not hold Debian package jq \(agent create\)$/);
  assert.match(
    String(named?.hint),
    /^Build it: berth image build --apt jq, then leave out the agent's image/,
  );
});

test("a command agent with Debian and npm packages runs on its agent image: jq and semver work, require finds semver, the turn commits; without packages it keeps the host's image", async (t) => {
  const { host, client, dataDir, sendAndCollect } = await startTestHost(t);
  // The real build (about two minutes the first time: a debootstrap root with jq; cached after).
  const built = await ensureAgentImage(host.docker, { cacheDir: CACHE_DIR, ...PACKAGES });
  const labels = (await host.docker.getImage(built.tag).inspect()).Config.Labels;
  assert.equal(labels['berth.apt'], 'jq');
  assert.equal(labels['berth.npm'], 'semver@7.6.3');

  const agent = await client.request<{ image?: string }>('POST', '/v1/agents', {
    name: 'pk',
    provider: 'command',
    packages: PACKAGES,
  });
  assert.equal(agent.image, built.tag, 'the agent runs the image of its recipe');
  const use =
    'jq --version > tools.txt && echo \'{"a":41}\' | jq ".a + 1" >> tools.txt && semver -i minor 1.2.3 >> tools.txt && ' +
    `node -e "console.log(require('semver').valid('v2.0.0'))" >> tools.txt && command -v semver >> tools.txt && cat tools.txt`;
  const events = await sendAndCollect('s1', { agent: 'pk', text: use }, done, 120_000);
  const last = events.at(-1)!;
  assert.equal(last.type, 'reply', JSON.stringify(events.slice(-3)));
  const expected = /^jq-1\.\d+(\.\d+)?\n42\n1\.3\.0\n2\.0\.0\n\/usr\/local\/bin\/semver\n$/;
  assert.match(String(last.data.text), expected);
  assert.equal((last.data.data as { exitCode: number }).exitCode, 0);
  await waitPromoted(host, 's1');
  assert.match(await readFile(join(dataDir, 'workspaces', 's1', 'committed', 'tools.txt'), 'utf8'), expected);

  // No packages: the host's image, which has neither.
  const plain = await client.request<{ image?: string }>('POST', '/v1/agents', {
    name: 'plain',
    provider: 'command',
  });
  assert.equal(plain.image, undefined, 'an agent without packages keeps the host image');
  const bare = await sendAndCollect(
    's2',
    { agent: 'plain', text: 'command -v jq semver || echo NEITHER' },
    done,
  );
  assert.equal(bare.at(-1)!.data.text, 'NEITHER\n');

  // Its packages changed: the image of its new recipe; dropped again: the host's image.
  const patched = await client.request<{ image?: string }>('PATCH', '/v1/agents/plain', {
    packages: PACKAGES,
  });
  assert.equal(patched.image, built.tag);
  const unpatched = await client.request<{ image?: string }>('PATCH', '/v1/agents/plain', { packages: {} });
  assert.equal(unpatched.image, undefined);
  // The packages agent changed otherwise keeps its image.
  const bigger = await client.request<{ image?: string }>('PATCH', '/v1/agents/pk', { memoryMb: 768 });
  assert.equal(bigger.image, built.tag);
});
