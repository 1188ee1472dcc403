/**
 * The Markdown → MarkdownV2 conversion: named cases, then every part of many generated
 * texts (Markdown and free text of Telegram's reserved characters) read back by a parser
 * of MarkdownV2 as strict as Telegram's: each must parse, fit its limit, and read as the
 * part's plain form.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RESERVED, readMarkdownV2 } from '../../test/helpers/markdown-v2.js';
import { escapeMarkdownV2, toTelegramParts } from './telegram-markdown.js';

function one(md: string): string {
  const parts = toTelegramParts(md, 4096);
  assert.equal(parts.length, 1);
  return parts[0]!.markdown;
}

test('Markdown becomes MarkdownV2, and everything else is escaped', () => {
  const cases: Array<[string, string, string]> = [
    ['plain text', 'Hello.', 'Hello\\.'],
    ['bold', 'a **b** c', 'a *b* c'],
    ['bold with underscores', '__b__', '*b*'],
    ['italic', '*i* and _j_', '_i_ and _j_'],
    ['bold around italic', '**a *b* c**', '*a _b_ c*'],
    ['strike', '~~gone~~', '~gone~'],
    ['code span escapes only ` and \\', '`a_b\\c*`', '`a_b\\\\c*`'],
    ['double-backtick code holds a backtick', '``a`b``', '`a\\`b`'],
    ['fenced block with language', '```ts\nconst a = 1;\n```', '```ts\nconst a = 1;\n```'],
    ['unclosed fence runs to the end', '```\nx.y', '```\nx.y\n```'],
    ['empty fence keeps a space', '```\n```', '```\n \n```'],
    ['heading → bold', '## Title!', '*Title\\!*'],
    ['link', '[the docs](https://x.org/a_b)', '[the docs](https://x.org/a_b)'],
    ['a backslash in a URL is escaped', '[a](https://x.org/\\)', '[a](https://x.org/\\\\)'],
    ['link with bold label', '[**go**](https://x.org)', '[*go*](https://x.org)'],
    ['a link to no URL stays text', '[a](javascript:x)', '\\[a\\]\\(javascript:x\\)'],
    ['snake_case is text', 'snake_case_name', 'snake\\_case\\_name'],
    ['a lone star is text', '2 * 3 = 6', '2 \\* 3 \\= 6'],
    ['unclosed bold is text', '**oops', '\\*\\*oops'],
    ['Markdown escapes keep their character', '\\*not italic\\*', '\\*not italic\\*'],
    ['a backslash before a letter stays', 'C:\\dir', 'C:\\\\dir'],
    ['code inside bold stays text', '**a `b`**', '*a \\`b\\`*'],
    ['every reserved character', RESERVED, escapeMarkdownV2(RESERVED)],
    ['surrogate pairs pass', 'ok 👍', 'ok 👍'],
    ['list and quote markers escaped', '- one\n> two\n1. three', '\\- one\n\\> two\n1\\. three'],
  ];
  for (const [name, md, want] of cases) assert.equal(one(md), want, name);
});

test('every part is valid MarkdownV2, fits its limit, and reads as its plain form', () => {
  // A fixed seed: the same texts every run.
  let seed = 42;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const pieces = [
    ...RESERVED.split(''),
    '\\',
    ' ',
    '\n',
    'a',
    'word',
    '**',
    '__',
    '~~',
    '```',
    '```py\n',
    '[x](https://e.org/p)',
    '👍',
    'é',
  ];
  for (let n = 0; n < 400; n++) {
    let md = '';
    const length = 1 + rand(120);
    for (let k = 0; k < length; k++) md += pieces[rand(pieces.length)];
    const limit = 8 + rand(64);
    const parts = toTelegramParts(md, limit);
    for (const part of parts) {
      assert.ok(part.markdown.length <= limit, `part of ${JSON.stringify(md)} over ${limit}`);
      let read: string;
      try {
        read = readMarkdownV2(part.markdown);
      } catch (err) {
        assert.fail(`${JSON.stringify(md)} → ${JSON.stringify(part.markdown)}: ${(err as Error).message}`);
      }
      assert.equal(read, part.plain, JSON.stringify(md));
    }
  }
});

test('long replies are cut between whole units, at a line break when there is one', () => {
  const code = `\`\`\`\n${'x.'.repeat(3000)}\n\`\`\``;
  const parts = toTelegramParts(`intro\n${code}`, 4096);
  assert.equal(parts.length, 2);
  for (const p of parts) {
    assert.ok(p.markdown.length <= 4096);
    readMarkdownV2(p.markdown);
  }
  // The code block is closed at the cut and reopened in the next part.
  assert.ok(parts[0]!.markdown.endsWith('\n```'));
  assert.ok(parts[1]!.markdown.startsWith('```\n'));
  assert.equal(parts.map((p) => p.plain).join(''), `intro\n${'x.'.repeat(3000)}`);

  // Escapes make the markup longer than the text: the cut counts the markup.
  const dots = toTelegramParts('.'.repeat(5000), 4096);
  assert.deepEqual(
    dots.map((p) => p.markdown.length),
    [4096, 4096, 1808],
  );
  const lines = toTelegramParts(`${'a'.repeat(3000)}\n${'b'.repeat(3000)}`, 4096);
  assert.deepEqual(
    lines.map((p) => p.plain),
    [`${'a'.repeat(3000)}\n`, 'b'.repeat(3000)],
  );
});
