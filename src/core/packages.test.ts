import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentSpecSchema } from './agent.js';
import { debianNameProblem, npmPinProblem } from './packages.js';

test('npm packages: an exact version is pinned; a bare name, a range, a tag or a URL is refused with how to pin it', () => {
  const pinned = ['typescript@5.6.3', '@types/node@20.11.30', 'left-pad@1.3.0', 'x@1.0.0-rc.1+build.5'];
  for (const spec of pinned) assert.equal(npmPinProblem(spec), null, spec);
  const refused: Array<[string, RegExp]> = [
    ['typescript', /^typescript names no version: pin an exact version, e.g. typescript@1\.2\.3/],
    ['@types/node', /^@types\/node names no version: pin an exact version, e.g. @types\/node@1\.2\.3/],
    ['typescript@^5', /"\^5" is a range or a tag, not a version: pin an exact version/],
    ['typescript@5', /"5" is a range or a tag/],
    ['typescript@latest', /"latest" is a range or a tag/],
    ['typescript@5.6.x', /"5\.6\.x" is a range or a tag/],
    ['TypeScript@5.6.3', /is not an npm package name@version/],
    ['git+https://example.com/x.git', /is not an npm package name@version/],
    ['--registry=http://x@1.0.0', /is not an npm package name@version/],
  ];
  for (const [spec, why] of refused) assert.match(String(npmPinProblem(spec)), why, spec);
});

test('Debian packages: names only, never an option', () => {
  for (const name of ['jq', 'git', 'g++', 'libc6-dev', 'python3.11'])
    assert.equal(debianNameProblem(name), null);
  for (const name of ['-y', 'j', 'Jq', 'jq=1.6-2.1', 'jq/bookworm', ''])
    assert.match(String(debianNameProblem(name)), /is not a Debian package name/, name);
});

test('the agent schema refuses an unpinned npm package, naming the field and the fix', () => {
  const parsed = agentSpecSchema.safeParse({
    name: 'a',
    provider: 'command',
    packages: { apt: ['jq'], npm: ['left-pad@1.3.0', 'typescript@^5'] },
  });
  assert.equal(parsed.success, false);
  const issue = parsed.error!.issues[0]!;
  assert.deepEqual(issue.path, ['packages', 'npm', 1]);
  assert.match(issue.message, /pin an exact version, e.g. typescript@1\.2\.3/);
  assert.equal(
    agentSpecSchema.safeParse({ name: 'a', provider: 'command', packages: { pip: ['x'] } }).success,
    false,
    'only apt and npm',
  );
});
