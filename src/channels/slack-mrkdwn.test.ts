/** The Markdown → mrkdwn conversion: named cases, then a long reply cut between whole entities. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { escapeMrkdwn, toSlackParts } from './slack-mrkdwn.js';

function one(md: string): string {
  const parts = toSlackParts(md, 4000);
  assert.equal(parts.length, 1);
  return parts[0]!.formatted!;
}

test('Markdown becomes mrkdwn, with &, < and > escaped everywhere', () => {
  const cases: Array<[string, string, string]> = [
    [
      'free text that is not Markdown',
      'Done: 3 files, 2 < 5 & 7 > 4.',
      'Done: 3 files, 2 &lt; 5 &amp; 7 &gt; 4.',
    ],
    ['bold', 'a **b** c', 'a *b* c'],
    ['bold with underscores', '__b__', '*b*'],
    ['italic', '*i* and _j_', '_i_ and _j_'],
    ['bold around italic', '**a *b* c**', '*a _b_ c*'],
    ['strike', '~~gone~~', '~gone~'],
    ['heading → bold', '## Title <x>', '*Title &lt;x&gt;*'],
    ['code span kept, escaped', '`a<b && **c**`', '`a&lt;b &amp;&amp; **c**`'],
    [
      'fenced block kept, its language dropped',
      '```ts\nif (a < b) x = **y**;\n```',
      '```\nif (a &lt; b) x = **y**;\n```',
    ],
    ['unclosed fence runs to the end', '```\nx', '```\nx\n```'],
    ['link', '[the docs](https://x.org/a_b?q=1&r=2)', '<https://x.org/a_b?q=1&amp;r=2|the docs>'],
    [
      'link with bold label and an escaped one',
      '[**go** & <see>](https://x.org)',
      '<https://x.org|*go* &amp; &lt;see&gt;>',
    ],
    ['a URL with | stays text', '[a](https://x.org/a|b)', '[a](https://x.org/a|b)'],
    ['a link to no URL stays text', '[a](javascript:x)', '[a](javascript:x)'],
    ['snake_case is text', 'call snake_case_name(a_b)', 'call snake_case_name(a_b)'],
    ['a lone star is text', '2 * 3 = 6', '2 * 3 = 6'],
    ['unclosed bold is text', '**oops', '**oops'],
    ['unmatched markers of every kind', '_a *b ~~c `d [e](', '_a *b ~~c `d [e]('],
    [
      'an existing Slack mention is escaped, not passed through',
      '<@U123> <!here>',
      '&lt;@U123&gt; &lt;!here&gt;',
    ],
    ['surrogate pairs pass', 'ok 👍', 'ok 👍'],
  ];
  for (const [name, md, want] of cases) assert.equal(one(md), want, name);
  assert.equal(toSlackParts('**a** <b>', 4000)[0]!.text, 'a <b>', 'the plain form has no markup');
  assert.equal(escapeMrkdwn('a<b>&c'), 'a&lt;b&gt;&amp;c');
});

test('a long reply is cut between whole entities, each part within the limit', () => {
  const reply = `intro **${'bold & '.repeat(500)}end**\n\`\`\`\n${'x<y;\n'.repeat(600)}\`\`\`\n[end](https://e.org)`;
  const parts = toSlackParts(reply, 4000);
  assert.equal(parts.length, 3);
  for (const p of parts) {
    assert.ok(p.formatted!.length <= 4000, `part of ${p.formatted!.length}`);
    // No escape is cut: every & starts a whole entity.
    assert.doesNotMatch(p.formatted!, /&(?!amp;|lt;|gt;)/);
  }
  assert.equal(
    parts.map((p) => p.text).join(''),
    `intro ${'bold & '.repeat(500)}end\n${'x<y;\n'.repeat(600).slice(0, -1)}\nend`,
    'the parts together are the whole reply',
  );
  // The bold run is closed at its cut, before the space there (Slack takes no closing
  // marker after a space), and reopened in the next part; so is the code block.
  assert.match(parts[0]!.formatted!, /bold\* $/);
  assert.match(parts[1]!.formatted!, /^\*&amp; bold/);
  assert.match(parts[1]!.formatted!, /\n```$/);
  assert.match(parts[2]!.formatted!, /^```\n/);
  assert.ok(parts.at(-1)!.formatted!.endsWith('<https://e.org|end>'));
});
