/**
 * Provider `opencode`: sst's opencode headless (`opencode run --format json`), speaking
 * the Anthropic Messages API (SSE) to the runner's model endpoint as its `anthropic`
 * provider with a base URL. Its XDG config, data (the session database) and state dirs
 * are under /workspace/.berth/opencode; its cache is scratch (/tmp). The first turn's
 * session id is written there when opencode reports it; later turns, and the retry of a
 * killed one, continue that session (`--session <id>`) from what was committed.
 *
 * Mapped: text parts and tool calls as progress, the last text as the reply, token counts
 * of each step, `error` events as HARNESS_FAILED. Permissions are all `allow` (berth's
 * sandbox is the boundary); the title of a new session is asked of the agent's model.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as harness from './harness-provider.js';

export const OPENCODE_BIN = '/usr/local/bin/opencode';
const SESSION_FILE = 'berth-session-id';

interface OpencodePart {
  text?: string;
  tool?: string;
  state?: { status?: string };
  tokens?: { input?: number; output?: number; cache?: { read?: number; write?: number } };
}

export const opencode: harness.HarnessAdapter = {
  name: 'opencode',
  instructionsFile: 'AGENTS.md',
  instructionsTarget: 'config/opencode/AGENTS.md',
  skillsTarget: 'config/opencode/skill',
  async begin(input) {
    const session = await harness.savedConversationId(input.stateDir, SESSION_FILE);
    const model = input.settings.model;
    await mkdir(join(input.stateDir, 'config', 'opencode'), { recursive: true });
    await writeFile(
      join(input.stateDir, 'config', 'opencode', 'opencode.json'),
      `${JSON.stringify(opencodeConfig(model, `${input.endpoint('anthropic')}/v1`), null, 2)}\n`,
    );
    let reply = '';
    const usage = { inputTokens: 0, outputTokens: 0 };
    let failure: string | null = null;
    let seenSession = session;
    return {
      argv: [OPENCODE_BIN, 'run', '--format', 'json', ...(session ? ['--session', session] : [])],
      // With no message argument, `opencode run` reads the message from stdin.
      stdin: harness.promptToSend(input, session !== ''),
      env: {
        XDG_CONFIG_HOME: join(input.stateDir, 'config'),
        XDG_DATA_HOME: join(input.stateDir, 'data'),
        XDG_STATE_HOME: join(input.stateDir, 'state'),
        XDG_CACHE_HOME: '/tmp/berth-opencode-cache',
        ANTHROPIC_API_KEY: harness.PLACEHOLDER_KEY,
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_AUTOUPDATE: '1',
        OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
        OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
        OPENCODE_DISABLE_SHARE: '1',
      },
      async onEvent(event) {
        const part = (event.part ?? {}) as OpencodePart;
        if (typeof event.sessionID === 'string' && event.sessionID !== seenSession) {
          seenSession = event.sessionID;
          await harness.saveConversationId(input.stateDir, SESSION_FILE, seenSession);
        }
        switch (event.type) {
          case 'text':
            reply = part.text ?? '';
            return [reply];
          case 'tool_use': {
            const status = part.state?.status;
            if (status === 'completed' || status === 'error')
              return [`tool ${part.tool ?? '?'} finished${status === 'error' ? ' with an error' : ''}`];
            return [`tool ${part.tool ?? '?'} started`];
          }
          case 'step_finish': {
            const t = part.tokens ?? {};
            usage.inputTokens += (t.input ?? 0) + (t.cache?.read ?? 0) + (t.cache?.write ?? 0);
            usage.outputTokens += t.output ?? 0;
            return [];
          }
          case 'error':
            failure = harness.textOf(event.error ?? event.message);
            return [];
          default:
            return [];
        }
      },
      finish: () =>
        harness.replyOrFailure('opencode', failure, reply, {
          model,
          sessionId: seenSession,
          resumed: session !== '',
          usage,
        }),
    };
  },
};

/** opencode's config: the anthropic provider at the runner's endpoint, the agent's model for everything. */
export function opencodeConfig(model: string, baseURL: string): Record<string, unknown> {
  return {
    $schema: 'https://opencode.ai/config.json',
    model: `anthropic/${model}`,
    small_model: `anthropic/${model}`,
    autoupdate: false,
    share: 'disabled',
    lsp: false,
    formatter: false,
    // Headless runs cannot answer a prompt: an "ask" would end the run.
    permission: {
      edit: 'allow',
      bash: 'allow',
      webfetch: 'allow',
      external_directory: 'allow',
      doom_loop: 'allow',
    },
    provider: {
      anthropic: {
        options: { baseURL, apiKey: harness.PLACEHOLDER_KEY },
        models: { [model]: { name: model } },
      },
    },
  };
}
