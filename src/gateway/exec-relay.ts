/**
 * Commands run in a live sandbox through its runner (docs/sandbox-api.md): the worker offers
 * each on the gateway, the runner takes it with its exec long-poll (GET /v1/exec, beside
 * its turn loop), runs it as a job and posts its output and its end back (POST
 * /v1/exec/output, /v1/exec/exit), which go to the command's sink in order. A cancel (the
 * client went away) is offered the same way, and the runner kills the command's process
 * group. Invariant: every sink gets exactly one terminal line, the runner's exit or, if the
 * sandbox ends first, SANDBOX_RESTARTED naming why; after it, nothing more.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import { type ExecLine, type ExecOffer, newId, type SandboxEnd } from '../core/index.js';
import { sendJson } from './http-json.js';
import { LongPoll } from './long-poll.js';
import { execExitBody, execOutputBody } from './schemas.js';

/** Where a command's lines go (the worker's control response). */
export type ExecSink = (line: ExecLine) => void;

export type ExecStart = Omit<Extract<ExecOffer, { kind: 'start' }>, 'kind' | 'execId'>;

type ParseBody = <T extends z.ZodTypeAny>(schema: T) => Promise<z.output<T>>;

export class ExecRelay {
  private readonly poll: LongPoll;
  /** Offers the runner has not taken yet, oldest first. */
  private readonly offers: ExecOffer[] = [];
  private readonly sinks = new Map<string, ExecSink>();
  private ended: SandboxEnd | null = null;

  constructor(holdMs: number) {
    this.poll = new LongPoll(holdMs);
  }

  /** Offers the command to the runner; returns its cancel (a no-op once it ended). */
  start(request: ExecStart, sink: ExecSink): () => void {
    const execId = newId('exec');
    if (this.ended) {
      sink(restarted(this.ended));
      return () => undefined;
    }
    this.sinks.set(execId, sink);
    this.offer({ kind: 'start', execId, ...request });
    return () => {
      if (!this.sinks.delete(execId)) return;
      const waiting = this.offers.findIndex((o) => o.kind === 'start' && o.execId === execId);
      if (waiting >= 0) this.offers.splice(waiting, 1);
      else this.offer({ kind: 'cancel', execId });
    };
  }

  /** The sandbox ends: every command still running gets its terminal SANDBOX_RESTARTED line. */
  end(why: SandboxEnd): void {
    if (this.ended) return;
    this.ended = why;
    this.offers.length = 0;
    this.poll.release();
    const sinks = [...this.sinks.values()];
    this.sinks.clear();
    for (const sink of sinks) sink(restarted(why));
  }

  /** The runner's exec routes (after the gateway checked its token and generation); false: not one of them. */
  async handle(req: IncomingMessage, res: ServerResponse, route: string, parse: ParseBody): Promise<boolean> {
    switch (route) {
      case 'GET /v1/exec': {
        const next = this.offers.shift();
        if (next) sendJson(res, 200, next);
        else this.poll.hold(req, res);
        return true;
      }
      case 'POST /v1/exec/output': {
        const { execId, stream, data } = await parse(execOutputBody);
        // A cancelled command's last output has nowhere to go: dropped.
        this.sinks.get(execId)?.({ type: stream, data });
        sendJson(res, 200, { ok: true });
        return true;
      }
      case 'POST /v1/exec/exit': {
        const { execId, error, exitCode, signal, timedOut } = await parse(execExitBody);
        const sink = this.sinks.get(execId);
        this.sinks.delete(execId);
        sink?.(
          error
            ? { type: 'error', code: error.code, message: error.message }
            : { type: 'exit', exitCode, ...(signal ? { signal } : {}), ...(timedOut ? { timedOut } : {}) },
        );
        sendJson(res, 200, { ok: true });
        return true;
      }
      default:
        return false;
    }
  }

  private offer(offer: ExecOffer): void {
    const waiting = this.poll.take();
    if (waiting) sendJson(waiting, 200, offer);
    else this.offers.push(offer);
  }
}

function restarted(why: SandboxEnd): ExecLine {
  return {
    type: 'error',
    code: 'SANDBOX_RESTARTED',
    reason: why.reason,
    message: `The sandbox ended while the command ran (${why.reason}: ${why.message})`,
  };
}
