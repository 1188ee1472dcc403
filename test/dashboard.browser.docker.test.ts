/**
 * The dashboard in a real browser: Debian's chromium driven by playwright-core against a
 * real host (Docker sandboxes, SQLite, HTTP). The page sends a message through its form and
 * shows the session go queued → running → done live; a screenshot is saved as an artifact
 * (artifacts/dashboard.png). A session's running turn is stopped with its Interrupt button.
 * A session's page (#/sessions/ID) shows its turns (a job that exited 7 in red), a turn's
 * diff and its files at an older version, refuses a rewind while a turn runs with the API's
 * code, and rewinds the session, which the next turn sees (artifacts/dashboard-session.png).
 * A job `docker kill`ed after its checkpoint: the page's timeline draws the running try live,
 * then the kill with its code and the next try resumed from the checkpoint
 * (artifacts/dashboard-timeline.png).
 * The channels page lists a channel, pauses it, opens its outbox, shows the API's code for a
 * channel that does not exist, and removes it after the operator confirms.
 */
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { chromium } from 'playwright-core';
import { hostPaths, type ScriptPlan } from '../src/core/index.js';
import { connectDocker } from '../src/runtime/index.js';
import { SecretStore } from '../src/secrets/index.js';
import { eventually } from './helpers/processes.js';
import { startTestHost } from './helpers/test-host.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = join(process.cwd(), 'artifacts');

test('dashboard: send from the page, see queued → running → done live, screenshot; the channels page', async (t) => {
  // The channel below polls a Telegram that is not there: nothing leaves the machine.
  const { host, client, dataDir } = await startTestHost(t, {
    BERTH_SLOTS: '1',
    BERTH_TELEGRAM_API_URL: 'http://127.0.0.1:9',
  });
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
  await page.waitForSelector('#sandboxes tr[data-session="busy"][data-phase="gone"] td.reason', {
    timeout: 30_000,
  });
  assert.match(
    (await page.textContent('#sandboxes tr[data-session="busy"][data-phase="gone"] td.reason')) ?? '',
    /^SlotWanted: /,
  );
  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });

  // The channels page: a Telegram channel made through the API is listed, paused from the page.
  await new SecretStore({ path: hostPaths(dataDir).secretsFile, key: '' }).set('tg', '1:fake');
  await client.request('POST', '/v1/channels', {
    platform: 'telegram',
    name: 'tg_dash',
    agent: 'scr',
    tokenSecret: 'tg',
    allowUsers: ['@alice'],
  });
  // 21 strangers each owed a refusal: one more than a page of its outbox.
  for (let chat = 1; chat <= 21; chat++) {
    const from = { chatId: String(chat), chatType: 'private', userId: String(chat), username: `u${chat}` };
    const inbound = { ...from, updateId: 0, messageId: '1', threadId: null, text: 'hi' };
    assert.equal(await host.store.commitChannelEvent('tg_dash', `e${chat}`, inbound, Date.now()), 'refuse');
  }
  await page.click('a[href="#/channels"]');
  const channel = '#channels tr[data-channel="tg_dash"]';
  await page.waitForSelector(`${channel} td.state[data-state="active"]`);
  assert.match((await page.textContent(channel)) ?? '', /^tg_dashtelegramscrper-chat@alice/);
  await page.click(`${channel} button:text("Pause")`);
  await page.waitForSelector(`${channel} td.state[data-state="paused"]`);
  assert.match((await page.textContent('#c-result')) ?? '', /^Channel tg_dash is paused/);
  const stored = await client.request<{ channels: { id: string; paused: boolean }[] }>('GET', '/v1/channels');
  assert.deepEqual(
    stored.channels.map((c) => [c.id, c.paused]),
    [['tg_dash', true]],
  );
  // Its outbox, opened from its row, a page at a time: 20 refusals, then the 21st.
  await page.click(`${channel} td:first-child`);
  const outbox = '#c-outbox[data-channel="tg_dash"]';
  await page.waitForSelector(`${outbox}[data-page="1"]`);
  assert.equal((await page.$$(`${outbox} tbody tr`)).length, 20);
  assert.match((await page.textContent(`${outbox} tbody tr`)) ?? '', /^\d+refusal1(pending|dead)\d/);
  await page.click('#c-next');
  await page.waitForSelector(`${outbox}[data-page="2"]`);
  assert.equal((await page.$$(`${outbox} tbody tr`)).length, 1);
  assert.match((await page.textContent(`${outbox} tbody tr`)) ?? '', /^\d+refusal21/);
  assert.equal(await page.isDisabled('#c-next'), true);
  await page.click('#c-prev');
  await page.waitForSelector(`${outbox}[data-page="1"]`);
  // A channel that does not exist: the API's code and hint.
  await page.goto(`${host.url}/#/channels/nope`);
  await page.waitForSelector('#c-result.error[data-code="CHANNEL_NOT_FOUND"]');
  // Remove asks first: this operator says yes.
  page.once('dialog', (d) => void d.accept());
  await page.click(`${channel} button.danger`);
  await page.waitForFunction(`!document.querySelector('${channel}')`);
  assert.deepEqual((await client.request<{ channels: unknown[] }>('GET', '/v1/channels')).channels, []);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(outside, [], 'the page fetches nothing from outside the host');
});

test('dashboard: a session page shows turns, a diff and older files; rewind is refused while a turn runs, then done from the page', async (t) => {
  const { host, client, sendAndCollect } = await startTestHost(t, { BERTH_SLOTS: '1' });
  await client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu'],
  });
  t.after(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  // Rewind and delete ask first: this operator says yes.
  page.on('dialog', (d) => void d.accept());
  await page.goto(`${host.url}/#token=${host.adminToken}`);
  const posted = await client.request<{ message: { id: number } }>('POST', '/v1/sessions/long/messages', {
    agent: 'sh',
    text: 'sleep 30',
  });
  const row = 'tr[data-session="long"]';
  await page.waitForSelector(`${row} td.state[data-state="running"]`, { timeout: 60_000 });

  // Its page, opened from its row: a rewind while the turn runs shows the API's code.
  await page.click(`${row} a`);
  await page.waitForSelector('#s-version option[value="0"]', { state: 'attached' });
  await page.click('#s-rewind');
  await page.waitForSelector('#s-result.error[data-code="SESSION_BUSY"]');
  assert.match((await page.textContent('#s-result')) ?? '', /^SESSION_BUSY: /);

  await page.click('a[href="#/"]');
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

  // Three turns, one a turn each: v1, v2 (a text change and a binary file), v3 (exits 7).
  const reply = (e: { type: string }) => e.type === 'reply';
  for (const text of [
    'mkdir -p src && echo one > src/a.txt',
    "echo two > src/a.txt && printf 'x\\000y' > bin.dat",
    'echo three >> src/a.txt; echo oops >&2; exit 7',
  ])
    await sendAndCollect('hist', { agent: 'sh', text }, reply);
  const hist = 'tr[data-session="hist"]';
  await page.waitForSelector(`${hist} td.state[data-state="nonzero"]`);
  assert.equal(await page.textContent(`${hist} td.state`), 'exit 7');

  await page.click(`${hist} a`);
  await page.waitForSelector('#s-turns tr[data-version="v3"] td.exit.nonzero');
  assert.equal(await page.textContent('#s-turns tr[data-version="v3"] td.exit'), '7');
  assert.equal(await page.textContent('#s-turns tr[data-version="v1"] td.exit'), '0');
  assert.match((await page.textContent('#s-facts')) ?? '', /storage\d+(\.\d)? \w*B/);

  // A turn opened: its diff, text lines coloured, the binary file by size.
  await page.click('#s-turns tr[data-version="v2"]');
  const file = (path: string) => `#s-turn .file[data-path="${path}"]`;
  await page.waitForSelector(`${file('src/a.txt')} pre.patch .add`);
  assert.equal(await page.textContent(`${file('src/a.txt')} .add`), '+two\n');
  assert.equal(await page.textContent(`${file('src/a.txt')} .del`), '-one\n');
  assert.match((await page.textContent(file('bin.dat'))) ?? '', /added bin\.dat[\s\S]*binary: – → 3 B/);

  // The files of v1: src/a.txt as it was, and no bin.dat yet.
  await page.selectOption('#s-files-version', '1');
  await page.click('#s-files[data-version="1"] tr[data-name="src"] button');
  await page.click('#s-files[data-path="src"] tr[data-name="a.txt"] button');
  await page.waitForFunction("document.querySelector('#s-file').textContent === 'one\\n'");
  await page.click('#s-files[data-path="src"] tr[data-name=".."] button');
  await page.waitForSelector('#s-files[data-version="1"][data-path=""] tr[data-name="src"]');
  assert.equal(await page.$('#s-files tr[data-name="bin.dat"]'), null);

  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-session.png'), fullPage: true });

  // Rewind to v1 from the page: a new version v4 holds v1's files, and the next turn runs on them.
  await page.selectOption('#s-version', '1');
  await page.click('#s-rewind');
  await page.waitForFunction(
    "/^Rewound: version 4 holds version 1/.test(document.querySelector('#s-result').textContent)",
  );
  const workspace = await client.request<{ version: number; rewinds: unknown[] }>(
    'GET',
    '/v1/sessions/hist/workspace',
  );
  assert.equal(workspace.version, 4);
  assert.deepEqual(workspace.rewinds, [{ version: 4, toVersion: 1 }]);
  const after = await sendAndCollect('hist', { text: 'cat src/a.txt; ls' }, reply);
  assert.equal(after.find(reply)?.data.text, 'one\nsrc\n');

  // A job killed after its checkpoint: the page draws its running try live, then the kill
  // (with its code) and the next try, resumed from checkpoint 1, to its commit.
  await client.request('POST', '/v1/sessions/kill/messages', {
    agent: 'sh',
    text: 'echo one > a.txt; berth-checkpoint one; [ "$BERTH_ATTEMPT" = 1 ] && sleep 600; echo two',
  });
  const running = await eventually('the job checkpointed', async () => {
    const view = await client.request<{ sandbox: string | null; currentTurn: { id: string } | null }>(
      'GET',
      '/v1/sessions/kill',
    );
    if (!view.currentTurn || !view.sandbox) return undefined;
    const timeline = await client.request<{ entries: { kind: string }[] }>(
      'GET',
      `/v1/sessions/kill/turns/${view.currentTurn.id}/timeline`,
    );
    return timeline.entries.some((e) => e.kind === 'checkpoint') ? view : undefined;
  });
  await page.goto(`${host.url}/#/sessions/kill`);
  const tl = '#s-timeline .tl-try';
  await page.waitForSelector(
    `${tl}[data-attempt="1"][data-status="running"] .tl-mark.checkpoint[data-seq="1"]`,
  );
  await connectDocker('/var/run/docker.sock').getContainer(running.sandbox!).kill();
  await page.waitForSelector(`${tl}[data-attempt="2"][data-status="committed"][data-resumed-from="1"]`, {
    timeout: 60_000,
  });
  await page.waitForSelector(`${tl}[data-attempt="2"] .tl-mark.resumed[data-seq="1"]`);
  assert.equal(
    await page.getAttribute(`${tl}[data-attempt="1"] .tl-mark.kill`, 'data-code'),
    'SANDBOX_EXITED',
  );
  assert.equal(await page.getAttribute('#s-timeline', 'data-running'), 'false');
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-timeline.png'), fullPage: true });
  assert.deepEqual(pageErrors, []);
});
