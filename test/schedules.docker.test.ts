/**
 * A scheduled message across a host restart: a schedule made with `berth schedule` on one
 * host, the host stopped, and a host on the same data dir started two days after the due
 * time (its clock moved on, as a host that was down finds it): the missed run is sent
 * once, the agent answers it in a real sandbox, and the schedule waits for its next time.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { destination, pino } from 'pino';
import { startHost } from '../src/cli/index.js';
import { firstRunOf, loadConfig, type Schedule } from '../src/core/index.js';
import { berth, eventually } from './helpers/processes.js';

const DAY = 86_400_000;

test('a host restarted across a due time sends the missed run once, and the agent answers it', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-sched-'));
  const config = loadConfig({ BERTH_LOG_LEVEL: 'info', BERTH_DATA: dataDir }, { apiPort: 0 });
  const log = pino({ level: 'info' }, destination({ dest: join(dataDir, 'host.log'), sync: true }));
  const first = await startHost(config, log);
  let second: Awaited<ReturnType<typeof startHost>> | undefined;
  t.after(async () => {
    await first.close();
    await second?.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  const env = { ...process.env, BERTH_URL: first.url, BERTH_DATA: dataDir };
  assert.equal((await berth(['agent', 'create', 'sh', '--provider', 'command'], env)).code, 0);
  const made = await berth(
    [
      'schedule',
      'daily',
      '--cron',
      '0 9 * * *',
      '--tz',
      'Europe/Paris',
      '--message',
      'echo scheduled',
      '--agent',
      'sh',
      '--json',
    ],
    env,
  );
  assert.equal(made.code, 0, made.stderr);
  const schedule = JSON.parse(made.stdout) as Schedule;
  const listed = await berth(['schedule', 'list', 'daily'], env);
  assert.match(
    listed.stdout,
    new RegExp(`${schedule.id}\\tdaily\\tactive\\t0 9 \\* \\* \\* \\(Europe/Paris\\)`),
  );
  await first.close();

  const offsetMs = schedule.nextRunAt! + 2 * DAY - Date.now();
  second = await startHost(config, log, { clock: { now: () => Date.now() + offsetMs } });
  const reply = await eventually(
    'the scheduled run answered',
    async () => {
      const messages = await second!.store.listMessages('daily', 0, 100);
      return messages.find((m) => m.direction === 'out');
    },
    60_000,
  );
  assert.equal(reply.text, 'scheduled\n');
  const inbound = (await second.store.listMessages('daily', 0, 100)).filter((m) => m.direction === 'in');
  assert.deepEqual(
    inbound.map((m) => m.text),
    ['echo scheduled'],
    'two missed runs, sent once',
  );
  const schedules = await second.store.listSchedules('daily');
  assert.equal(schedules[0]!.runs, 1);
  const after = firstRunOf('0 9 * * *', 'Europe/Paris', schedule.nextRunAt! + 2 * DAY);
  assert.equal(schedules[0]!.nextRunAt, after, 'the next 09:00 in Paris after the restart');
});
