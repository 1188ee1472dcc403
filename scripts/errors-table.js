#!/usr/bin/env node
// Rewrites the generated table of docs/errors.md from ERRORS in src/core/errors.ts (run after `npm run build`).
import { readFileSync, writeFileSync } from 'node:fs';
import { ERRORS } from '../dist/src/core/errors.js';

const file = new URL('../docs/errors.md', import.meta.url);
const doc = readFileSync(file, 'utf8');
const start = doc.indexOf('| code | HTTP | kind | what to do |');
const end = doc.indexOf('\n\n', start);
const rows = Object.entries(ERRORS).map(
  ([code, e]) => `| \`${code}\` | ${e.status} | ${e.retryable ? 'retryable' : 'terminal'} | ${e.hint} |`,
);
const table = ['| code | HTTP | kind | what to do |', '|---|---|---|---|', ...rows].join('\n');
writeFileSync(file, doc.slice(0, start) + table + doc.slice(end));
