// A node:test reporter that writes one JSON line per finished test (suites are not tests):
// its file, its name, its outcome (pass, fail, skip), and for a skipped or todo test the reason it
// gave (null when it gave none). A todo test runs but its failure fails nothing, so it checks
// nothing either: it counts as a skip. scripts/run-tests.js reads the lines to total the
// phases it runs, to list what did not run, and to fail the run when every suite must run.
export default async function* testRecordReporter(source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { skip, todo, file, name, details } = event.data;
    if (details?.type === 'suite') continue;
    const why = skip !== undefined && skip !== false ? skip : todo;
    const skipped = why !== undefined && why !== false;
    const given = typeof why === 'string' ? why : null;
    const outcome = skipped ? 'skip' : event.type === 'test:fail' ? 'fail' : 'pass';
    const reason = !skipped || skip === why ? given : `todo: ${given ?? '(no reason given)'}`;
    yield `${JSON.stringify({ file: file ?? null, name, outcome, reason })}\n`;
  }
}
