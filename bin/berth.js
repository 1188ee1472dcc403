#!/usr/bin/env node
// The `berth` command: the compiled CLI. Run `npm run build` (or `make setup`) first.
import { main } from '../dist/src/cli/main.js';

await main(process.argv, process.env);
