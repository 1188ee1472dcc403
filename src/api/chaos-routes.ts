/**
 * /v1/chaos/reports (admin): the reports `berth chaos` saved under <data>/chaos/, newest
 * first, cut to what the dashboard's fault timeline shows.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyPluginAsync } from 'fastify';
import { hostPaths } from '../core/index.js';
import type { PluginDeps } from './deps.js';

const MAX_REPORTS = 10;

interface SavedReport {
  startedAt: number;
  wallMs: number;
  passed: boolean;
  faultLog: { kind: string; at: number }[];
  timing: unknown;
  requests: unknown;
}

export const chaosRoutes: FastifyPluginAsync<PluginDeps> = async (app, { config, routes }) => {
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/chaos/reports',
      summary: 'Saved berth chaos reports: faults injected, detection and recovery times',
      tag: 'chaos',
      access: 'admin',
      status: 200,
      returns: '{reports: {file, startedAt, wallMs, passed, faults, timing, requests}[]}',
    },
    async () => {
      const dir = hostPaths(config.dataDir).chaosReportsDir;
      const files = await readdir(dir).catch(() => [] as string[]);
      const newest = files
        .filter((f) => f.endsWith('.json'))
        .sort()
        .reverse()
        .slice(0, MAX_REPORTS);
      const reports = [];
      for (const file of newest) {
        const r = JSON.parse(await readFile(join(dir, file), 'utf8')) as SavedReport;
        reports.push({
          file,
          startedAt: r.startedAt,
          wallMs: r.wallMs,
          passed: r.passed,
          faults: r.faultLog.map((f) => ({ kind: f.kind, at: f.at })),
          timing: r.timing,
          requests: r.requests,
        });
      }
      return { reports };
    },
  );
};
