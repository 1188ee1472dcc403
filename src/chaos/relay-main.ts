/**
 * The relay process of a chaos run (store-relay.ts starts it): `node relay-main.js
 * '{"address":…,"upstreams":[{"host":…,"port":…}]}'` listens on the address, one port per
 * upstream, prints `{"ports":[…]}` as one line once it listens, and relays until its
 * parent closes its stdin or sends SIGTERM. A process of its own, so what a node's worker
 * waits for on the relay never waits behind the chaos driver's own work (hundreds of event
 * streams on a busy machine).
 *
 * Invariants: it exits when its stdin closes, so a parent that died (even SIGKILLed)
 * leaves no relay behind; a bad argument or a failed listen exits 1 with one line on stderr.
 */
import { relayServers, type Upstream } from './tcp-relay.js';

const { address, upstreams } = JSON.parse(process.argv[2] ?? '{}') as {
  address: string;
  upstreams: Upstream[];
};
try {
  const relay = await relayServers(upstreams, address);
  process.stdout.write(`${JSON.stringify({ ports: relay.ports })}\n`);
  const end = () => {
    relay.close().finally(() => process.exit(0));
  };
  process.stdin.on('end', end);
  process.stdin.on('error', end);
  process.stdin.resume();
  process.once('SIGTERM', end);
} catch (err) {
  process.stderr.write(`relay on ${address}: ${(err as Error).message}\n`);
  process.exit(1);
}
