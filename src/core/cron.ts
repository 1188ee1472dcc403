/**
 * Cron schedules in a time zone, pure: `parseCron` validates a standard 5-field
 * expression (minute hour day-of-month month day-of-week; `*`, lists, ranges, steps,
 * month and weekday names, 7 = Sunday) or a macro (@hourly @daily @weekly @monthly
 * @yearly), and `nextCronTime` finds the first matching minute strictly after an
 * instant, read in the given IANA zone. When both day fields are restricted a day matches
 * either (as in Vixie cron). Across DST changes a local time that does not exist is
 * skipped, and one that happens twice matches twice.
 */
import { BerthError } from './errors.js';

export interface CronSpec {
  minutes: Set<number>;
  hours: Set<number>;
  days: Set<number>;
  months: Set<number>;
  weekdays: Set<number>;
  /** Whether each day field is restricted (not `*`): the day rule depends on it. */
  daysRestricted: boolean;
  weekdaysRestricted: boolean;
}

const MACROS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const FIELDS = [
  { name: 'minute', min: 0, max: 59, names: [] as string[], base: 0 },
  { name: 'hour', min: 0, max: 23, names: [], base: 0 },
  { name: 'day of month', min: 1, max: 31, names: [], base: 0 },
  { name: 'month', min: 1, max: 12, names: MONTHS, base: 1 },
  { name: 'day of week', min: 0, max: 7, names: WEEKDAYS, base: 0 },
];
/** No cron matches nothing for longer than this (Feb 29 in a weekday-restricted cron: 28 years; we stop at 8). */
const SEARCH_YEARS = 8;

export function parseCron(expression: string): CronSpec {
  const text = MACROS[expression.trim().toLowerCase()] ?? expression.trim();
  const parts = text.split(/\s+/);
  if (parts.length !== 5)
    throw invalid(expression, `has ${parts.length} fields, not 5 (minute hour day month weekday)`);
  const sets = parts.map((part, i) => parseField(part, FIELDS[i]!, expression));
  const weekdays = new Set([...sets[4]!].map((d) => d % 7));
  return {
    minutes: sets[0]!,
    hours: sets[1]!,
    days: sets[2]!,
    months: sets[3]!,
    weekdays,
    daysRestricted: parts[2] !== '*',
    weekdaysRestricted: parts[4] !== '*',
  };
}

function parseField(part: string, f: (typeof FIELDS)[number], expression: string): Set<number> {
  const values = new Set<number>();
  const value = (token: string): number => {
    const named = f.names.indexOf(token.toLowerCase());
    const n = named >= 0 ? named + f.base : /^\d+$/.test(token) ? Number(token) : Number.NaN;
    if (!(n >= f.min && n <= f.max))
      throw invalid(expression, `${f.name} "${token}" is not in ${f.min}-${f.max}`);
    return n;
  };
  for (const item of part.split(',')) {
    const m = /^(\*|[A-Za-z0-9]+)(?:-([A-Za-z0-9]+))?(?:\/(\d+))?$/.exec(item);
    if (!m) throw invalid(expression, `${f.name} "${item}" is not a value, range or step`);
    const step = m[3] === undefined ? 1 : Number(m[3]);
    if (step < 1) throw invalid(expression, `${f.name} step "${m[3]}" must be at least 1`);
    const from = m[1] === '*' ? f.min : value(m[1]!);
    const to = m[1] === '*' ? f.max : m[2] !== undefined ? value(m[2]) : m[3] !== undefined ? f.max : from;
    if (to < from) throw invalid(expression, `${f.name} range "${item}" runs backwards`);
    for (let n = from; n <= to; n += step) values.add(n);
  }
  return values;
}

function invalid(expression: string, why: string): BerthError {
  return new BerthError('INVALID_INPUT', `Cron "${expression}" ${why}`, {
    hint: 'Use five fields, e.g. "0 9 * * mon-fri" (9:00 on weekdays), or @hourly, @daily, @weekly.',
  });
}

/** Throws INVALID_INPUT unless `tz` is an IANA time zone this Node knows. */
export function checkTimeZone(tz: string): void {
  try {
    formatter(tz);
  } catch (err) {
    throw new BerthError('INVALID_INPUT', `Time zone "${tz}" is not known`, {
      cause: err,
      hint: 'Use an IANA zone name such as UTC, Europe/Paris or America/New_York.',
    });
  }
}

/** The first instant (epoch ms, on a minute) strictly after `afterMs` that matches; null if none within years. */
export function nextCronTime(spec: CronSpec, tz: string, afterMs: number): number | null {
  let t = Math.floor(afterMs / 60_000) * 60_000 + 60_000;
  const end = afterMs + SEARCH_YEARS * 366 * 24 * 3_600_000;
  while (t <= end) {
    const local = localFields(tz, t);
    const dayMatches =
      spec.daysRestricted && spec.weekdaysRestricted
        ? spec.days.has(local.day) || spec.weekdays.has(local.weekday)
        : spec.days.has(local.day) && spec.weekdays.has(local.weekday);
    if (!spec.months.has(local.month) || !dayMatches || !spec.hours.has(local.hour)) {
      t += (60 - local.minute) * 60_000; // the next local hour: zones with half-hour offsets too
    } else if (!spec.minutes.has(local.minute)) {
      t += 60_000;
    } else {
      return t;
    }
  }
  return null;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      weekday: 'short',
    });
    formatters.set(tz, f);
  }
  return f;
}

function localFields(tz: string, t: number) {
  const parts: Record<string, string> = {};
  for (const p of formatter(tz).formatToParts(t)) parts[p.type] = p.value;
  return {
    month: Number(parts.month),
    day: Number(parts.day),
    hour: Number(parts.hour),
    minute: Number(parts.minute),
    weekday: WEEKDAYS.indexOf(parts.weekday!.toLowerCase().slice(0, 3)),
  };
}
