import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonLines, parseJsonLines } from './json-lines.js';

async function collect(chunks: (string | Uint8Array)[], skipInvalid = false): Promise<unknown[]> {
  async function* source() {
    yield* chunks;
  }
  const out: unknown[] = [];
  for await (const value of jsonLines(source(), { skipInvalid })) out.push(value);
  return out;
}

test('jsonLines: lines split across chunks, blank lines, a last line without newline', async () => {
  const cases: { name: string; chunks: (string | Uint8Array)[]; expected: unknown[] }[] = [
    { name: 'one chunk', chunks: ['{"a":1}\n{"a":2}\n'], expected: [{ a: 1 }, { a: 2 }] },
    { name: 'split line', chunks: ['{"a":', '1}\n{"a"', ':2}\n'], expected: [{ a: 1 }, { a: 2 }] },
    { name: 'blank and CRLF lines', chunks: ['\n{"a":1}\r\n\n'], expected: [{ a: 1 }] },
    { name: 'no final newline', chunks: ['{"a":1}\n2'], expected: [{ a: 1 }, 2] },
    { name: 'nothing', chunks: [], expected: [] },
  ];
  for (const c of cases) assert.deepEqual(await collect(c.chunks), c.expected, c.name);
});

test('jsonLines: a UTF-8 character split between two byte chunks', async () => {
  const bytes = new TextEncoder().encode('{"name":"é"}\n');
  const cut = bytes.indexOf(0xc3) + 1;
  assert.deepEqual(await collect([bytes.slice(0, cut), bytes.slice(cut)]), [{ name: 'é' }]);
});

test('a line that is not JSON throws, unless it is to be skipped', async () => {
  await assert.rejects(collect(['{"a":1}\nnot json\n']), SyntaxError);
  assert.deepEqual(await collect(['{"a":1}\nnot json\n{"a":2}'], true), [{ a: 1 }, { a: 2 }]);
  assert.deepEqual(parseJsonLines('{"a":1}\n\nx\n', { skipInvalid: true }), [{ a: 1 }]);
  assert.throws(() => parseJsonLines('x'), SyntaxError);
});
