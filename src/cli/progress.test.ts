import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createProgress, formatElapsed, type ProgressState, renderProgressLine } from './progress.js';

const BASE: ProgressState = { label: 'berth-base', phase: 'unpack', done: 12, total: 40, elapsedMs: 37_000 };

test('renderProgressLine', async (t) => {
  const cases: Array<{ name: string; state: ProgressState; width: number; want: string }> = [
    {
      name: 'bar, count, phase and clock',
      state: BASE,
      width: 80,
      want: `berth-base [#########${'-'.repeat(21)}] 12/40 unpack 0:37`,
    },
    {
      name: 'bar shrinks to the width',
      state: BASE,
      width: 41,
      want: 'berth-base [###-------] 12/40 unpack 0:37',
    },
    {
      name: 'bar dropped when narrower than ten columns',
      state: BASE,
      width: 40,
      want: 'berth-base 12/40 unpack 0:37',
    },
    {
      name: 'no total: count without a bar',
      state: { ...BASE, phase: 'download', total: undefined },
      width: 80,
      want: 'berth-base 12 download 0:37',
    },
    {
      name: 'no counts at all',
      state: { label: 'berth-base', phase: 'resolve', elapsedMs: 5_000 },
      width: 80,
      want: 'berth-base resolve 0:05',
    },
    {
      name: 'done past total is clamped',
      state: { ...BASE, done: 41 },
      width: 41,
      want: 'berth-base [##########] 40/40 unpack 0:37',
    },
    {
      name: 'complete bar',
      state: { ...BASE, done: 40 },
      width: 41,
      want: 'berth-base [##########] 40/40 unpack 0:37',
    },
    {
      name: 'truncated to a tiny terminal',
      state: BASE,
      width: 12,
      want: 'berth-base 1',
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const line = renderProgressLine(c.state, c.width);
      assert.equal(line, c.want);
      assert.ok(line.length <= c.width);
    });
  }
});

test('formatElapsed', () => {
  assert.equal(formatElapsed(0), '0:00');
  assert.equal(formatElapsed(93_200), '1:33');
  assert.equal(formatElapsed(3_600_000 + 61_000), '1:01:01');
  assert.equal(formatElapsed(-5), '0:00');
});

function collector(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, stream: { isTTY, columns: 60, write: (s: string) => writes.push(s) } };
}

test('non-TTY prints on phase change and every tenth only', () => {
  const { writes, stream } = collector(false);
  const progress = createProgress('img', { stream, now: () => 0 });
  progress.update({ phase: 'download', done: 1 });
  progress.update({ phase: 'download', done: 2 });
  for (let done = 0; done <= 100; done++) progress.update({ phase: 'unpack', done, total: 100 });
  progress.finish('img (built in 1.0 s)');
  progress.update({ phase: 'late' });
  assert.equal(writes.length, 1 + 11 + 1);
  assert.equal(writes[0], 'img 1 download 0:00\n');
  assert.match(writes[1]!, /^img \[-+\] 0\/100 unpack 0:00\n$/);
  assert.match(writes[11]!, /^img \[#+\] 100\/100 unpack 0:00\n$/);
  assert.equal(writes.at(-1), 'img (built in 1.0 s)\n');
});

test('TTY redraws one line in place and clears it on finish', () => {
  const { writes, stream } = collector(true);
  let clock = 0;
  const progress = createProgress('img', { stream, now: () => clock });
  progress.update({ phase: 'unpack', done: 1, total: 4 });
  progress.update({ phase: 'unpack', done: 2, total: 4 }); // within 100 ms: skipped
  clock = 150;
  progress.update({ phase: 'unpack', done: 3, total: 4 });
  progress.finish('done');
  assert.equal(writes.length, 3);
  assert.ok(writes.slice(0, 2).every((w) => w.startsWith('\r') && w.endsWith('\x1b[K')));
  assert.match(writes[1]!, /3\/4 unpack/);
  assert.equal(writes[2], '\r\x1b[Kdone\n');
});

test('finish without a message only erases the line', () => {
  const tty = collector(true);
  const a = createProgress('img', { stream: tty.stream, now: () => 0 });
  a.update({ phase: 'import' });
  a.finish();
  assert.equal(tty.writes.at(-1), '\r\x1b[K');
  const plain = collector(false);
  const b = createProgress('img', { stream: plain.stream, now: () => 0 });
  b.update({ phase: 'import' });
  b.finish();
  assert.deepEqual(plain.writes, ['img import 0:00\n']);
});
