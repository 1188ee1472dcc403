// Terminal progress for long CLI steps (image builds): one redrawn line on a TTY, a few plain
// lines otherwise.
//
// Invariants:
// - On a TTY the line is redrawn in place (`\r` + erase to end of line), at most every 100 ms
//   unless the phase changes, plus once a second so the clock moves during silent phases.
// - Off a TTY (CI logs, pipes) a line is printed only when the phase changes or `done` crosses
//   another tenth of `total`, so a build leaves at most a dozen lines per phase.
// - `renderProgressLine` is pure and never returns more than `widthCols` characters.
// - After `finish` the reporter writes nothing more and holds no timer.

export interface ProgressUpdate {
  phase: string;
  done?: number;
  total?: number;
}

export interface ProgressState extends ProgressUpdate {
  label: string;
  elapsedMs: number;
}

export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface Progress {
  update(p: ProgressUpdate): void;
  /** Replaces the progress line with `message` (or just erases it) and stops the reporter. */
  finish(message?: string): void;
}

const MAX_BAR_COLS = 30;
const MIN_BAR_COLS = 10;
const TTY_REDRAW_MS = 100;

/** `label [#####-----] 12/40 phase 0:37`; without a total the bar is left out: `label 12 phase 0:37`. */
export function renderProgressLine(state: ProgressState, widthCols: number): string {
  const hasTotal = state.total !== undefined && state.total > 0;
  const done = state.done === undefined ? undefined : Math.max(0, state.done);
  const count =
    done === undefined ? '' : hasTotal ? `${Math.min(done, state.total!)}/${state.total}` : `${done}`;
  const tail = [count, state.phase, formatElapsed(state.elapsedMs)].filter(Boolean).join(' ');
  let line = `${state.label} ${tail}`;
  if (hasTotal) {
    // label + space + [bar] + space + tail
    const room = widthCols - state.label.length - tail.length - 4;
    const barCols = Math.min(MAX_BAR_COLS, room);
    if (barCols >= MIN_BAR_COLS) {
      const filled = Math.round((Math.min(done ?? 0, state.total!) / state.total!) * barCols);
      line = `${state.label} [${'#'.repeat(filled)}${'-'.repeat(barCols - filled)}] ${tail}`;
    }
  }
  return line.length > widthCols ? line.slice(0, Math.max(0, widthCols)) : line;
}

/** `m:ss`, or `h:mm:ss` from one hour on. */
export function formatElapsed(ms: number): string {
  const totalSec = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(totalSec / 3600);
  const m = Math.floor((totalSec % 3600) / 60);
  const s = String(totalSec % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

export function createProgress(
  label: string,
  opts: { stream?: ProgressStream; now?: () => number } = {},
): Progress {
  const stream = opts.stream ?? process.stderr;
  const now = opts.now ?? Date.now;
  const startedAt = now();
  const tty = stream.isTTY === true;
  let current: ProgressUpdate | undefined;
  let lastDrawAt = Number.NEGATIVE_INFINITY;
  let lastTenth = -1;
  let finished = false;

  const line = () =>
    renderProgressLine(
      { label, ...current!, elapsedMs: now() - startedAt },
      tty ? (stream.columns ?? 80) : 80,
    );
  const draw = () => {
    lastDrawAt = now();
    stream.write(`\r${line()}\x1b[K`);
  };
  const timer = tty
    ? setInterval(() => {
        if (current) draw();
      }, 1000)
    : undefined;
  timer?.unref();

  return {
    update(p) {
      if (finished) return;
      const phaseChanged = current?.phase !== p.phase;
      current = p;
      const tenth =
        p.done !== undefined && p.total !== undefined && p.total > 0
          ? Math.floor((Math.min(p.done, p.total) / p.total) * 10)
          : -1;
      if (tty) {
        if (phaseChanged || now() - lastDrawAt >= TTY_REDRAW_MS) draw();
        return;
      }
      if (phaseChanged || tenth > lastTenth) {
        lastTenth = tenth;
        stream.write(`${line()}\n`);
      }
    },
    finish(message) {
      if (finished) return;
      finished = true;
      if (timer) clearInterval(timer);
      const text = message === undefined ? '' : `${message}\n`;
      if (tty) stream.write(`\r\x1b[K${text}`);
      else if (text) stream.write(text);
    },
  };
}
