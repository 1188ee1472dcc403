#!/usr/bin/env node
// Rewrites the option table of docs/config.md from CONFIG_OPTIONS in src/core/config-options.ts (run after `npm run build`).
import { readFileSync, writeFileSync } from 'node:fs';
import { withConfigOptionsTable } from '../dist/src/core/config-options.js';

const file = new URL('../docs/config.md', import.meta.url);
writeFileSync(file, withConfigOptionsTable(readFileSync(file, 'utf8')));
