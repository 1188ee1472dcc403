import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nextCronTime, parseCron } from './cron.js';
import { decideScheduleRun, MISSED_AFTER_MS, type Schedule } from './schedule.js';

const at = (iso: string) => Date.parse(iso);

const next: [string, string, string, string, string][] = [
  // name, cron, tz, after (UTC), expected (UTC)
  ['every 15 minutes', '*/15 * * * *', 'UTC', '2026-11-30T10:07:30Z', '2026-11-30T10:15:00Z'],
  ['strictly after a match', '0 * * * *', 'UTC', '2026-11-30T10:00:00Z', '2026-11-30T11:00:00Z'],
  [
    'weekdays 9:00 Paris, from a Friday',
    '0 9 * * mon-fri',
    'Europe/Paris',
    '2026-11-27T09:30:00Z',
    '2026-11-30T08:00:00Z',
  ],
  ['Paris summer time', '0 9 * * *', 'Europe/Paris', '2026-07-01T12:00:00Z', '2026-07-02T07:00:00Z'],
  ['@daily in New York', '@daily', 'America/New_York', '2026-11-30T12:00:00Z', '2026-12-01T05:00:00Z'],
  ['half-hour zone', '0 9 * * *', 'Asia/Kolkata', '2026-11-30T00:00:00Z', '2026-11-30T03:30:00Z'],
  [
    '02:30 skipped on the spring-forward day',
    '30 2 * * *',
    'Europe/Paris',
    '2026-03-28T12:00:00Z',
    '2026-03-30T00:30:00Z',
  ],
  ['Feb 29 only in a leap year', '0 0 29 2 *', 'UTC', '2026-03-01T00:00:00Z', '2028-02-29T00:00:00Z'],
  ['day or weekday when both are set', '0 0 13 * fri', 'UTC', '2026-11-01T00:00:00Z', '2026-11-06T00:00:00Z'],
  ['month names and lists', '0 12 1 jan,jul *', 'UTC', '2026-02-01T00:00:00Z', '2026-07-01T12:00:00Z'],
  ['7 is Sunday', '0 0 * * 7', 'UTC', '2026-11-30T00:00:00Z', '2026-12-06T00:00:00Z'],
];

for (const [name, cron, tz, after, expected] of next) {
  test(`nextCronTime: ${name}`, () => {
    assert.equal(
      new Date(nextCronTime(parseCron(cron), tz, at(after))!).toISOString(),
      new Date(at(expected)).toISOString(),
    );
  });
}

test('nextCronTime: a date that never comes is null', () => {
  assert.equal(nextCronTime(parseCron('0 0 30 2 *'), 'UTC', at('2026-01-01T00:00:00Z')), null);
});

const invalid: [string, RegExp][] = [
  ['* * * *', /has 4 fields, not 5/],
  ['60 * * * *', /minute "60" is not in 0-59/],
  ['* * * * funday', /day of week "funday" is not in 0-7/],
  ['*/0 * * * *', /step "0" must be at least 1/],
  ['5-1 * * * *', /range "5-1" runs backwards/],
  ['a,b * * * *', /minute "a" is not in 0-59/],
];
for (const [cron, message] of invalid) {
  test(`parseCron refuses "${cron}"`, () => {
    assert.throws(() => parseCron(cron), { code: 'INVALID_INPUT', message });
  });
}

const BASE = at('2026-11-30T09:00:00Z');
const schedule = (s: Partial<Schedule>) =>
  ({ cron: '0 9 * * *', tz: 'UTC', missed: 'once', status: 'active', nextRunAt: BASE, ...s }) as Schedule;
const decisions: [string, Partial<Schedule>, number, string, number | null][] = [
  ['not due yet', {}, BASE - 1, 'wait', null],
  ['due: sent', {}, BASE + 800, 'fire', at('2026-12-01T09:00:00Z')],
  [
    'late within the grace, skip policy: still sent',
    { missed: 'skip' },
    BASE + MISSED_AFTER_MS,
    'fire',
    at('2026-12-01T09:00:00Z'),
  ],
  [
    'missed for days, once: sent once, next after now',
    {},
    BASE + 3 * 86_400_000 + 3_600_000,
    'fire',
    at('2026-12-04T09:00:00Z'),
  ],
  [
    'missed for days, skip: not sent',
    { missed: 'skip' },
    BASE + 3 * 86_400_000 + 3_600_000,
    'skip',
    at('2026-12-04T09:00:00Z'),
  ],
  ['paused', { status: 'paused' }, BASE + 1000, 'wait', null],
];
for (const [name, s, now, action, nextRunAt] of decisions) {
  test(`decideScheduleRun: ${name}`, () => {
    const d = decideScheduleRun(schedule(s), now);
    assert.equal(d.action, action);
    if (d.action !== 'wait') {
      assert.equal(d.dueAt, BASE);
      assert.equal(d.nextRunAt, nextRunAt);
    }
  });
}
