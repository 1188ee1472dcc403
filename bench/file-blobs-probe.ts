/**
 * One build's warm turns, for the `fileBlobs` benchmark: `node file-blobs-probe.js BUILD
 * TURNS SECONDS` loads the bench harness of the build at BUILD (this one or an older one)
 * and prints one JSON line: a warm bound session's reply to a turn that writes nothing and
 * to one that writes 4 KiB, then sustained turns/s with one busy session per slot.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

type Harness = typeof import('./harness.js');

const [build, turnsArg, secondsArg] = process.argv.slice(2);
if (!build || !turnsArg || !secondsArg) throw new Error('usage: file-blobs-probe.js BUILD TURNS SECONDS');
const { benchHost, stats, timedMessage }: Harness = await import(
  pathToFileURL(join(build, 'dist/bench/harness.js')).href
);
const slots = 8;
const h = await benchHost({ BERTH_IDLE_TIMEOUT: '10m' }, slots);
try {
  await timedMessage(h.client, 'warm', 'true'); // boots the sandbox
  const writesNothing: number[] = [];
  const writes4KiB: number[] = [];
  for (let i = 0; i < Number(turnsArg); i++) {
    writesNothing.push((await timedMessage(h.client, 'warm', 'true')).replyMs);
    writes4KiB.push((await timedMessage(h.client, 'warm', `head -c 4096 /dev/urandom > f${i % 50}`)).replyMs);
  }
  const sessions = Array.from({ length: slots }, (_, i) => `busy-${i}`);
  for (const s of sessions) await timedMessage(h.client, s, 'true'); // bind each
  const deadline = performance.now() + Number(secondsArg) * 1000;
  const counts = await Promise.all(
    sessions.map(async (s) => {
      let n = 0;
      for (; performance.now() < deadline; n++) await timedMessage(h.client, s, 'true');
      return n;
    }),
  );
  const turns = counts.reduce((a, b) => a + b, 0);
  process.stdout.write(
    `${JSON.stringify({
      writesNothingReplyMs: stats(writesNothing),
      writes4KiBReplyMs: stats(writes4KiB),
      turnsPerSecond: Math.round((turns / Number(secondsArg)) * 10) / 10,
    })}\n`,
  );
} finally {
  await h.close();
}
