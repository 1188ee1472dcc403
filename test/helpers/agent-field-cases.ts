/**
 * Every agent field with the `berth agent create` flags that set it and what the spec then
 * holds: the flag unit test and the round trip through CLI, file, API and SDK share it.
 * Rows with `image` ask for an agent image the host must have built (a harness's, or one
 * with packages): the API refuses the agent without it, so a round trip skips such a row,
 * saying so, where the image is missing.
 */
import type { AgentImageNeeds } from '../../src/core/index.js';

export interface FieldCase {
  field: string;
  argv: string[];
  expect: Record<string, unknown>;
  image?: AgentImageNeeds;
}

/** The cases; host paths (mounts, configDir) are under `root`, which a test makes and allowlists. */
export const fieldCases = (root = '/srv'): FieldCase[] => [
  { field: 'provider', argv: ['--provider', 'script'], expect: { provider: 'script' } },
  { field: 'isolation', argv: ['--isolation', 'runsc'], expect: { isolation: 'runsc' } },
  { field: 'image', argv: ['--image', 'debian:12'], expect: { image: 'debian:12' } },
  {
    field: 'packages',
    argv: ['--apt', 'jq,git', '--npm', 'typescript@5.6.3'],
    expect: { packages: { apt: ['jq', 'git'], npm: ['typescript@5.6.3'] } },
    image: { harnesses: [], apt: ['git', 'jq'], npm: ['typescript@5.6.3'] },
  },
  { field: 'memoryMb', argv: ['--memory', '1024'], expect: { memoryMb: 1024 } },
  { field: 'cpus', argv: ['--cpus', '0.5'], expect: { cpus: 0.5 } },
  { field: 'pidsLimit', argv: ['--pids', '64'], expect: { pidsLimit: 64 } },
  { field: 'workspaceMb', argv: ['--workspace-mb', '64'], expect: { workspaceMb: 64 } },
  {
    field: 'egress',
    argv: [
      '--egress',
      '127.0.0.1:9000,example.com:443',
      '--egress',
      'pypi.org:443',
      '--egress-header',
      'api.github.com:443=Authorization: Bearer {{secret:github}}',
      '--egress-header',
      'api.github.com:443=X-Team: core=1',
    ],
    expect: {
      egress: [
        '127.0.0.1:9000',
        'example.com:443',
        'pypi.org:443',
        {
          target: 'api.github.com:443',
          headers: { Authorization: 'Bearer {{secret:github}}', 'X-Team': 'core=1' },
        },
      ],
    },
  },
  { field: 'mode', argv: ['--resident'], expect: { mode: 'resident' } },
  {
    field: 'recycle',
    argv: [
      '--resident',
      '--recycle-max-age',
      '60000',
      '--recycle-max-rss',
      '200',
      '--recycle-max-open-files',
      '500',
    ],
    expect: { mode: 'resident', recycle: { maxAgeMs: 60000, maxRssMb: 200, maxOpenFiles: 500 } },
  },
  {
    field: 'mounts',
    argv: ['--mount', `${root}/data:data:ro`, '--mount', `${root}/models:/data/models`],
    expect: {
      mounts: [
        { hostPath: `${root}/data`, containerPath: 'data' },
        { hostPath: `${root}/models`, containerPath: 'models' },
      ],
    },
  },
  { field: 'instructions', argv: ['--instructions', 'Be brief.'], expect: { instructions: 'Be brief.' } },
  {
    field: 'model',
    argv: ['--provider', 'anthropic', '--model', 'claude-sonnet-4-5'],
    expect: { provider: 'anthropic', model: 'claude-sonnet-4-5' },
  },
  {
    field: 'configDir',
    argv: ['--provider', 'claude-code', '--model', 'm', '--config-dir', `${root}/cfg`],
    expect: { configDir: `${root}/cfg` },
    image: { harnesses: ['claude-code'], apt: [], npm: [] },
  },
  { field: 'harnessTimeoutMs', argv: ['--harness-timeout', '5000'], expect: { harnessTimeoutMs: 5000 } },
  {
    field: 'baseUrl',
    argv: ['--base-url', 'http://127.0.0.1:8080'],
    expect: { baseUrl: 'http://127.0.0.1:8080' },
  },
  { field: 'secret', argv: ['--secret', 'work-key'], expect: { secret: 'work-key' } },
  { field: 'maxTokens', argv: ['--max-tokens', '1000'], expect: { maxTokens: 1000 } },
  { field: 'maxSteps', argv: ['--max-steps', '7'], expect: { maxSteps: 7 } },
  { field: 'toolTimeoutMs', argv: ['--tool-timeout', '3000'], expect: { toolTimeoutMs: 3000 } },
  { field: 'maxSchedules', argv: ['--max-schedules', '0'], expect: { maxSchedules: 0 } },
  { field: 'retention', argv: ['--keep-versions', '20'], expect: { retention: { versions: 20 } } },
  {
    field: 'budget',
    argv: ['--tokens-per-hour', '10000', '--turns-per-hour', '20'],
    expect: { budget: { tokensPerHour: 10000, turnsPerHour: 20 } },
  },
];
