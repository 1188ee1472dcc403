/**
 * Provider `claude-code`: Claude Code's CLI headless (`claude -p … --output-format
 * stream-json --verbose`), speaking the Anthropic Messages API (SSE) to the runner's model
 * endpoint. Its config dir (CLAUDE_CONFIG_DIR: transcripts, settings, the composed CLAUDE.md
 * and skills) is /workspace/.berth/claude-code. The session's transcript has an id derived
 * from berth's session id, so the first turn starts it (`--session-id`) and every later
 * turn, or the retry of a killed one, resumes it (`--resume`) from what was committed. A
 * retry resumed from a model-call checkpoint finds the transcript as of that call, the
 * turn's prompt already in it: it resumes with CONTINUATION instead of the prompt again.
 *
 * Mapped: assistant text and tool calls as progress, the result as the reply, its usage,
 * an error result as HARNESS_FAILED. Permission prompts are skipped
 * (`--dangerously-skip-permissions`: berth's sandbox is the boundary; refused as root,
 * fine as uid 1000); sub-agents run inside the same harness on the agent's model.
 */
import { createHash } from 'node:crypto';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { HarnessError } from './harness-process.js';
import { type HarnessAdapter, PLACEHOLDER_KEY, promptToSend, textOf } from './harness-provider.js';

export const CLAUDE_BIN = '/usr/local/bin/claude';

interface ContentBlock {
  type: string;
  text?: string;
  name?: string;
  id?: string;
  tool_use_id?: string;
  is_error?: boolean;
}

export const claudeCode: HarnessAdapter = {
  name: 'claude-code',
  instructionsFile: 'CLAUDE.md',
  instructionsTarget: 'CLAUDE.md',
  skillsTarget: 'skills',
  async begin(input) {
    const id = transcriptId(input.sessionId);
    // Claude Code keeps a session under projects/<cwd with / as ->/<id>.jsonl.
    const transcript = join(input.stateDir, 'projects', input.workspace.replace(/\//g, '-'), `${id}.jsonl`);
    const resume = await access(transcript).then(
      () => true,
      () => false,
    );
    const model = input.settings.model;
    const toolNames = new Map<string, string>();
    let result: Record<string, unknown> | null = null;
    return {
      // -p with no prompt argument reads it from stdin.
      stdin: promptToSend(input, resume),
      argv: [
        CLAUDE_BIN,
        '-p',
        '--output-format',
        'stream-json',
        '--verbose',
        '--dangerously-skip-permissions',
        '--model',
        model,
        ...(resume ? ['--resume', id] : ['--session-id', id]),
      ],
      env: {
        CLAUDE_CONFIG_DIR: input.stateDir,
        ANTHROPIC_BASE_URL: input.endpoint('anthropic'),
        ANTHROPIC_API_KEY: PLACEHOLDER_KEY,
        // Every call on the agent's model: the gateway refuses any other.
        ANTHROPIC_SMALL_FAST_MODEL: model,
        ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
        ANTHROPIC_DEFAULT_SONNET_MODEL: model,
        ANTHROPIC_DEFAULT_OPUS_MODEL: model,
        CLAUDE_CODE_SUBAGENT_MODEL: model,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_TELEMETRY: '1',
        DISABLE_AUTOUPDATER: '1',
        DISABLE_ERROR_REPORTING: '1',
        DISABLE_BUG_COMMAND: '1',
      },
      async onEvent(event) {
        const message = event.message as { content?: ContentBlock[] } | undefined;
        const blocks = Array.isArray(message?.content) ? message.content : [];
        if (event.type === 'assistant') {
          const texts: string[] = [];
          for (const b of blocks) {
            if (b.type === 'text' && b.text) texts.push(b.text);
            if (b.type === 'tool_use' && b.name) {
              if (b.id) toolNames.set(b.id, b.name);
              texts.push(`tool ${b.name} started`);
            }
          }
          return texts;
        }
        if (event.type === 'user')
          return blocks
            .filter((b) => b.type === 'tool_result')
            .map(
              (b) =>
                `tool ${toolNames.get(b.tool_use_id ?? '') ?? '?'} finished${b.is_error ? ' with an error' : ''}`,
            );
        if (event.type === 'result') result = event;
        return [];
      },
      finish() {
        if (!result) throw new HarnessError('HARNESS_FAILED', 'claude-code exited without a result');
        const r = result as Record<string, unknown> & { usage?: Record<string, number> };
        if (r.is_error === true || r.subtype !== 'success')
          throw new HarnessError(
            'HARNESS_FAILED',
            `claude-code: ${textOf(r.subtype)}: ${textOf(r.result ?? r.errors).slice(0, 4000)}`,
          );
        const u = r.usage ?? {};
        return {
          text: textOf(r.result),
          data: {
            provider: 'claude-code',
            model,
            sessionId: id,
            resumed: resume,
            numTurns: r.num_turns,
            stopReason: r.stop_reason,
            usage: {
              inputTokens:
                (u.input_tokens ?? 0) +
                (u.cache_creation_input_tokens ?? 0) +
                (u.cache_read_input_tokens ?? 0),
              outputTokens: u.output_tokens ?? 0,
            },
          },
        };
      },
    };
  },
};

/** A UUID (the form Claude Code's --session-id takes) that is a function of berth's session id. */
export function transcriptId(sessionId: string): string {
  const h = createHash('sha256').update(`berth-session:${sessionId}`).digest('hex');
  const variant = ((Number.parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
