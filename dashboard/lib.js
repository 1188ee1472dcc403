// What every view of the dashboard shares: the operator's token, calls to the API, the
// event stream, and small DOM helpers. Text from the API only ever goes in as textContent.

export const $ = (sel) => document.querySelector(sel);

const fromHash = new URLSearchParams(location.hash.slice(1)).get('token');
if (fromHash) {
  sessionStorage.setItem('berth-token', fromHash);
  history.replaceState(null, '', location.pathname);
}
export let token = sessionStorage.getItem('berth-token') ?? '';

/** One API call; a failure throws with the API's error (code, message, hint) as `body.error`. */
export async function api(path, init = {}) {
  const res = await fetch(path, {
    ...init,
    headers: { ...(init.body ? { 'content-type': 'application/json' } : {}), authorization: `Bearer ${token}`, ...init.headers },
  });
  if (init.raw && res.ok) return res;
  const text = await res.text();
  const body = text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text;
  if (!res.ok) throw Object.assign(new Error(body?.error?.message ?? `HTTP ${res.status}`), { status: res.status, body });
  return body;
}

/** An API failure as the operator should read it: its catalogue code, message and hint. */
export function errorText(err) {
  const e = err.body?.error;
  if (!e) return err.message;
  return `${e.code}: ${e.message}${e.hint ? ` — ${e.hint}` : ''}`;
}

/** One page of a keyset-paged listing (`{<field>: [...], next}`), after a cursor (null: the first page). */
export function page(url, after = null, limit = 500) {
  return api(`${url}?limit=${limit}${after === null ? '' : `&after=${encodeURIComponent(after)}`}`);
}

/** Every item of a paged listing, a page at a time; a very long one shows its first 2000. */
export async function allPages(url, field) {
  const all = [];
  let next = null;
  do {
    const answer = await page(url, next);
    all.push(...answer[field]);
    next = answer.next;
  } while (next !== null && all.length < 2000);
  return all;
}

/** Empties an action's result line (its error class and code too). */
export function clearResult(out) {
  out.className = '';
  delete out.dataset.code;
  out.replaceChildren();
  return out;
}

/**
 * Runs an operator's action and shows its outcome in `out`: what `run` returns (nothing when
 * the operator said no), or the API's error (showError).
 */
export async function showOutcome(out, run) {
  clearResult(out).textContent = '…';
  try {
    const done = await run();
    if (done === undefined) out.textContent = '';
    else out.replaceChildren(...[done].flat());
  } catch (err) {
    showError(out, err);
  }
}

/** An API failure in `out`: its code, message and hint, the code also as data-code. */
export function showError(out, err) {
  out.className = 'error';
  out.dataset.code = err.body?.error?.code ?? '';
  out.textContent = errorText(err);
}

/** An element with its class and text (never HTML), and children appended. */
export function el(tag, className, text, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  node.append(...children);
  return node;
}

export function button(text, onClick, className) {
  const b = el('button', className, text);
  b.type = 'button';
  b.addEventListener('click', onClick);
  return b;
}

/** A command job's exit code from its reply's data; null when the reply is not a job's. */
export function exitCodeOf(reply) {
  const code = reply?.data?.exitCode;
  return typeof code === 'number' ? code : null;
}

/** A turn's or message's status; a job that exited non-zero is not shown as a success. */
export function statusOf(status, exitCode = null) {
  return el('span', exitCode ? 'status' : `status status-${status}`, status);
}

export function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = -1;
  do {
    v /= 1024;
    i++;
  } while (v >= 1024 && i < units.length - 1);
  return `${v.toFixed(1)} ${units[i]} (${n} bytes)`;
}

export function formatMs(ms) {
  if (ms === null || ms === undefined) return '–';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export const time = (at) => (at ? new Date(at).toLocaleTimeString() : '–');

/** Server-Sent Events over fetch (EventSource cannot send a header); reconnects after the last id. */
export async function follow(path, onEvent) {
  let lastId = 0;
  for (;;) {
    try {
      const res = await fetch(`${path}?after=${lastId}`, { headers: { authorization: `Bearer ${token}` } });
      if (res.status === 401) return showTokenForm();
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = { id: null, type: 'message', data: '' };
          for (const line of block.split('\n')) {
            const i = line.indexOf(':');
            if (i <= 0) continue;
            const field = line.slice(0, i);
            const v = line.slice(i + 1).replace(/^ /, '');
            if (field === 'id') event.id = Number(v);
            else if (field === 'event') event.type = v;
            else if (field === 'data') event.data += v;
          }
          if (!event.data) continue;
          if (event.id !== null) lastId = event.id;
          onEvent({ ...event, data: JSON.parse(event.data) });
        }
      }
    } catch {
      // Host restarting: try again below.
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

export function showTokenForm() {
  $('#token-form').hidden = false;
  $('#summary').textContent = 'needs a token';
}
$('#token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  token = $('#token-input').value.trim();
  sessionStorage.setItem('berth-token', token);
  location.reload();
});
