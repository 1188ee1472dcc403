// A node:test reporter that writes one JSON line per skipped or todo test or suite: its file,
// its name and the reason it gave (null when it gave none). A todo test runs but its failure
// fails nothing, so it checks nothing either: it counts as a skip. scripts/run-tests.js reads
// them to list what did not run, and to fail the run when every suite must run.
export default async function* skipReporter(source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { skip, todo, file, name } = event.data;
    const why = skip !== undefined && skip !== false ? skip : todo;
    if (why === undefined || why === false) continue;
    const reason = typeof why === 'string' ? why : null;
    yield `${JSON.stringify({ file: file ?? null, name, reason: skip === why ? reason : `todo: ${reason ?? '(no reason given)'}` })}\n`;
  }
}
