/**
 * The dashboard at `/`: static files from <package>/dashboard/ (no framework, no
 * CDN: nothing outside the host is fetched), read once at start. The page itself holds
 * no data; it calls the API with the token the operator gives it.
 */
import { readFile } from 'node:fs/promises';
import type { FastifyPluginAsync } from 'fastify';

const ASSETS = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/dashboard/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard/lib.js': { file: 'lib.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard/session.js': { file: 'session.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard/history.js': { file: 'history.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard/timeline.js': { file: 'timeline.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard/channels.js': { file: 'channels.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard/style.css': { file: 'style.css', type: 'text/css; charset=utf-8' },
} as const;

/** dist/src/api/ → the package root's dashboard/. */
const DASHBOARD_DIR = new URL('../../../dashboard/', import.meta.url);

export const dashboardRoutes: FastifyPluginAsync = async (app) => {
  for (const [url, asset] of Object.entries(ASSETS)) {
    const body = await readFile(new URL(asset.file, DASHBOARD_DIR), 'utf8');
    app.get(url, async (_request, reply) =>
      reply.type(asset.type).header('cache-control', 'no-cache').send(body),
    );
  }
};
