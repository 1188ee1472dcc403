// A node:test reporter that writes one JSON line per skipped test or suite: its file, its
// name and the reason it gave (null when it gave none). scripts/run-tests.js reads them to
// list what did not run, and to fail the run when every suite must run.
export default async function* skipReporter(source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { skip, file, name } = event.data;
    if (skip === undefined || skip === false) continue;
    yield `${JSON.stringify({ file: file ?? null, name, reason: typeof skip === 'string' ? skip : null })}\n`;
  }
}
