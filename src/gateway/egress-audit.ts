/**
 * How the egress door records each decision: allowed or not, the target, and for a tunnel
 * its bytes each way and what the gateway did on it. The proxy and the interceptor both
 * write it; the gateway stores it (sandbox-audit.ts).
 */
export type EgressAudit = (entry: {
  allowed: boolean;
  host: string;
  port: number;
  reason?: string;
  bytesUp?: number;
  bytesDown?: number;
  /** Header names the gateway set on the tunnel's requests (never their values). */
  injected?: string[];
  /** HTTP requests served on an intercepted tunnel. */
  requests?: number;
}) => Promise<void>;
