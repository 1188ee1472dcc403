/**
 * The audit rows a sandbox's gateway writes (and logs): egress decisions, requests of a
 * stale generation, requests without a valid token. The last are capped per sandbox, so
 * a job hammering its socket with forged tokens cannot flood the audit table.
 */
import type { Logger } from 'pino';
import type { Clock } from '../core/index.js';
import type { Fence, GatewayStore } from '../store/index.js';
import type { EgressAudit } from './egress-audit.js';

const MAX_UNAUTHORIZED_AUDITS = 100;

export class SandboxAudit {
  private unauthorizedAudits = 0;

  constructor(
    private readonly store: Pick<GatewayStore, 'audit'>,
    private readonly clock: Clock,
  ) {}

  /** Never throws: a tunnel's closing audit runs detached from any request. */
  async egress(binding: Fence, agent: string, entry: Parameters<EgressAudit>[0], log: Logger): Promise<void> {
    const data = { agent, workerId: binding.workerId, ...entry };
    log.info(data, entry.allowed ? 'Egress allowed' : 'Egress denied');
    try {
      await this.store.audit(
        {
          kind: entry.allowed ? 'egress-allowed' : 'egress-denied',
          sessionId: binding.sessionId,
          generation: binding.generation,
          data,
        },
        this.clock.now(),
      );
    } catch (err) {
      log.error({ err, ...data }, 'Egress audit failed');
    }
  }

  async staleGeneration(
    binding: Fence,
    operation: string,
    generation: number,
    now: number,
    log: Logger,
  ): Promise<void> {
    log.warn({ operation, generation }, 'Refused stale sandbox request');
    await this.store.audit(
      {
        kind: 'stale-generation',
        sessionId: binding.sessionId,
        generation,
        data: { operation, workerId: binding.workerId },
      },
      now,
    );
  }

  /** A token that is not this sandbox's: forged, expired, or another session's (a leaked one). */
  async unauthorized(
    binding: Fence | null,
    operation: string,
    tokenSession: string | null,
    now: number,
    log: Logger,
  ): Promise<void> {
    if (++this.unauthorizedAudits > MAX_UNAUTHORIZED_AUDITS) return;
    log.warn({ operation, tokenSession }, 'Refused sandbox request without a valid token');
    await this.store.audit(
      {
        kind: 'unauthorized',
        // Unbound (a warm sandbox): no session yet; the audit row still names the attempt.
        ...(binding ? { sessionId: binding.sessionId, generation: binding.generation } : {}),
        data: { operation, tokenSession, workerId: binding?.workerId ?? null },
      },
      now,
    );
  }
}
