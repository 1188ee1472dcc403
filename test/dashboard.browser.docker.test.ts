/**
 * The dashboard in a real browser: Debian's chromium driven by playwright-core against a
 * real host (Docker sandboxes, SQLite, HTTP). The page sends a message through its form and
 * shows the session go queued → running → done live; a screenshot is saved as an artifact
 * (artifacts/dashboard.png). A session's running turn is stopped with its Interrupt button.
 */
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { chromium } from 'playwright-core';
import type { ScriptPlan } from '../src/core/index.js';
import { eventually } from './helpers/processes.js';
import { startTestHost } from './helpers/test-host.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = join(process.cwd(), 'artifacts');

test('dashboard: send from the page, see queued → running → done live, screenshot', async (t) => {
  const { host, client } = await startTestHost(t, { BERTH_SLOTS: '1' });
  await client.request('POST', '/v1/agents', { name: 'scr', provider: 'script', memoryMb: 256 });

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  t.after(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  const outside: string[] = [];
  page.on('request', (r) => {
    if (!r.url().startsWith(host.url)) outside.push(r.url());
  });
  await page.goto(`${host.url}/#token=${host.adminToken}`);
  // Expressions as strings: they run in the page, which this file's types (no DOM lib) do not describe.
  await page.waitForFunction("/sessions/.test(document.querySelector('#summary').textContent)");
  // The only slot is busy for a few seconds, so the page's message visibly waits its turn.
  const busy: ScriptPlan = { steps: [{ progress: 'holding the slot' }, { sleep: 4000 }], reply: 'busy done' };
  await client.request('POST', '/v1/sessions/busy/messages', { agent: 'scr', text: JSON.stringify(busy) });
  await page.waitForSelector('tr[data-session="busy"] td.state[data-state="running"]');

  const plan: ScriptPlan = {
    steps: [{ progress: 'thinking in the browser test' }, { sleep: 1500 }],
    reply: 'hello from the dashboard',
  };
  await page.fill('#send-session', 'web1');
  await page.fill('#send-agent', 'scr');
  await page.fill('#send-text', JSON.stringify(plan));
  await page.click('#send-button');
  const row = 'tr[data-session="web1"]';
  for (const state of ['queued', 'running', 'done']) {
    await page.waitForSelector(`${row} td.state[data-state="${state}"]`, { timeout: 60_000 });
  }
  assert.equal(await page.getAttribute(row, 'data-seen'), 'queued running done');
  assert.match((await page.textContent(row)) ?? '', /hello from the dashboard/);
  await page.waitForFunction("document.querySelectorAll('#events li').length >= 6");
  assert.match((await page.textContent('#events')) ?? '', /web1 reply/);
  assert.match((await page.textContent('#workers')) ?? '', /alive, \d\/1 slots/);
  // The busy session gave its one slot up to web1: its sandbox is listed as ended, and why.
  await page.waitForFunction(
    "/busy SlotWanted/.test(document.querySelector('#ended').textContent)",
    undefined,
    {
      timeout: 30_000,
    },
  );
  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(outside, [], 'the page fetches nothing from outside the host');
});

test('dashboard: the Interrupt button of a session with a running turn stops it; its message ends interrupted', async (t) => {
  const { host, client } = await startTestHost(t, { BERTH_SLOTS: '1' });
  await client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu'],
  });
  t.after(() => browser.close());
  const page = await browser.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  await page.goto(`${host.url}/#token=${host.adminToken}`);
  const posted = await client.request<{ message: { id: number } }>('POST', '/v1/sessions/long/messages', {
    agent: 'sh',
    text: 'sleep 30',
  });
  const row = 'tr[data-session="long"]';
  await page.waitForSelector(`${row} td.state[data-state="running"]`, { timeout: 60_000 });
  await page.click(`${row} button.interrupt`, { timeout: 30_000 });
  const message = await eventually('the message interrupted', async () => {
    const { messages } = await client.request<{ messages: { id: number; status: string }[] }>(
      'GET',
      '/v1/sessions/long/messages',
    );
    const m = messages.find((x) => x.id === posted.message.id);
    return m && m.status !== 'processing' && m.status !== 'pending' ? m : undefined;
  });
  assert.equal(message.status, 'interrupted');
  await page.waitForFunction(`!document.querySelector('${row} button.interrupt')`, undefined, {
    timeout: 30_000,
  });
  assert.deepEqual(pageErrors, []);
});
