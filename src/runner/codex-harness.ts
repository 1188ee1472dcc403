/**
 * Provider `codex`: OpenAI's Codex CLI headless (`codex exec --json`), speaking the
 * Responses API (streamed) to the runner's model endpoint through a model provider of
 * its own config. CODEX_HOME (config.toml, sessions, the composed AGENTS.md and skills) is
 * /workspace/.berth/codex. The first turn's thread id is written there when Codex reports
 * it; every later turn, and the retry of a killed one, resumes that thread (`codex exec
 * resume <id>`) from what was committed (a killed first turn's id vanishes with it).
 *
 * Mapped: agent messages and command executions / file changes as progress, the last
 * agent message as the reply, the turn's usage, `turn.failed` and `error` events as
 * HARNESS_FAILED. Approvals and Codex's own sandbox are off
 * (`--dangerously-bypass-approvals-and-sandbox`: berth's sandbox is the boundary).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type HarnessAdapter,
  PLACEHOLDER_KEY,
  promptToSend,
  replyOrFailure,
  saveConversationId,
  savedConversationId,
  textOf,
} from './harness-provider.js';

export const CODEX_BIN = '/usr/local/bin/codex';
const THREAD_FILE = 'berth-thread-id';

interface CodexItem {
  type?: string;
  text?: string;
  command?: string;
  message?: string;
  exit_code?: number | null;
  status?: string;
}

export const codex: HarnessAdapter = {
  name: 'codex',
  instructionsFile: 'AGENTS.md',
  instructionsTarget: 'AGENTS.md',
  skillsTarget: 'skills',
  async begin(input) {
    const thread = await savedConversationId(input.stateDir, THREAD_FILE);
    const model = input.settings.model;
    await writeFile(join(input.stateDir, 'config.toml'), codexConfig(model, input.endpoint('openai')));
    let reply = '';
    let usage: Record<string, number> = {};
    let failure: string | null = null;
    return {
      argv: [
        CODEX_BIN,
        'exec',
        '--json',
        '--skip-git-repo-check',
        '--dangerously-bypass-approvals-and-sandbox',
        '-m',
        model,
        ...(thread ? ['resume', thread] : []),
        // The prompt '-' is read from stdin.
        '-',
      ],
      stdin: promptToSend(input, thread !== ''),
      env: {
        CODEX_HOME: input.stateDir,
        OPENAI_API_KEY: PLACEHOLDER_KEY,
      },
      async onEvent(event) {
        const item = (event.item ?? {}) as CodexItem;
        switch (event.type) {
          case 'thread.started':
            if (typeof event.thread_id === 'string' && event.thread_id !== thread)
              await saveConversationId(input.stateDir, THREAD_FILE, event.thread_id);
            return [];
          case 'item.started':
            return item.type === 'command_execution'
              ? [`tool ${item.type} started: ${item.command ?? ''}`]
              : [];
          case 'item.completed':
            if (item.type === 'agent_message') {
              reply = item.text ?? '';
              return [reply];
            }
            if (item.type === 'command_execution' || item.type === 'file_change') {
              const failed = item.status === 'failed' || (item.exit_code ?? 0) !== 0;
              return [`tool ${item.type} finished${failed ? ' with an error' : ''}`];
            }
            return item.type === 'error' ? [`codex: ${item.message ?? ''}`] : [];
          case 'turn.completed':
            usage = (event.usage ?? {}) as Record<string, number>;
            return [];
          case 'turn.failed':
          case 'error':
            // turn.failed carries {error: {message}}, a stream error {message}.
            failure = textOf((event.error as { message?: unknown } | undefined)?.message ?? event.message);
            return [];
        }
        return [];
      },
      finish: () =>
        replyOrFailure('codex', failure, reply, {
          model,
          resumed: thread !== '',
          usage: { inputTokens: usage.input_tokens ?? 0, outputTokens: usage.output_tokens ?? 0 },
        }),
    };
  },
};

/** Codex's config: one model provider, the runner's endpoint, no update check, no analytics. */
export function codexConfig(model: string, baseUrl: string): string {
  return [
    '# Written by berth before every run; changes here are overwritten.',
    `model = ${JSON.stringify(model)}`,
    'model_provider = "berth"',
    'check_for_update_on_startup = false',
    '[model_providers.berth]',
    'name = "berth"',
    `base_url = ${JSON.stringify(baseUrl)}`,
    'wire_api = "responses"',
    'env_key = "OPENAI_API_KEY"',
    'request_max_retries = 4',
    'stream_max_retries = 4',
    '[analytics]',
    'enabled = false',
    '[otel]',
    'exporter = "none"',
    '',
  ].join('\n');
}
