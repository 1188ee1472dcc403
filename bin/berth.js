#!/usr/bin/env node
// The `berth` command's entry: the compiled CLI. Run `npm run build` (or `make setup`) first.
// `bin/berth` runs it on the right Node.js; run straight on an older one than package.json's
// engines, it stops here with the fix, before a native addon built for another runtime loads.
import { readFileSync } from 'node:fs';

const engines = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines.node;
const minMajor = Number(/^>=(\d+)/.exec(engines)?.[1]);
if (Number(process.versions.node.split('.')[0]) < minMajor) {
  console.error(
    `berth: this is Node.js ${process.version} (${process.execPath}); berth runs on Node.js ${engines}.\n` +
      `Fix: run bin/berth (it picks berth's Node.js, installed by 'make setup-demo'), or put a Node.js ${engines} first on PATH.`,
  );
  process.exit(1);
}
const { main } = await import('../dist/src/cli/main.js');
await main(process.argv, process.env);
