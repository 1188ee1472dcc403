// A session's history on its page: one turn opened (its attempts and why each ended, its
// timing, messages, replies and state, and what it changed: the diff), and the workspace
// browsed at any retained version (a directory listed, a file opened).

import { $, api, button, el, errorText, exitCodeOf, formatBytes, formatMs, statusOf, time } from './lib.js';

const path = (id, rest) => `/v1/sessions/${encodeURIComponent(id)}${rest}`;

export async function openTurn(sessionId, turnId) {
  const section = $('#s-turn-section');
  const box = $('#s-turn');
  section.hidden = false;
  section.dataset.turn = turnId;
  $('#s-turn-title').textContent = `Turn ${turnId}`;
  box.replaceChildren(el('p', 'muted', 'loading…'));
  try {
    const detail = await api(path(sessionId, `/turns/${encodeURIComponent(turnId)}`));
    const parts = renderDetail(detail);
    if (detail.turn.status === 'committed') parts.push(await diffOf(sessionId, turnId));
    box.replaceChildren(...parts);
  } catch (err) {
    box.replaceChildren(el('p', 'error', errorText(err)));
  }
}

function renderDetail(d) {
  const t = d.timing;
  const parts = [
    el(
      'p',
      null,
      `${d.version === null ? 'no version' : `made v${d.version}`} · queued ${time(t.queuedAt)} · waited ${formatMs(t.waitedMs)} · ran ${formatMs(t.runMs)} · total ${formatMs(t.totalMs)}`,
    ),
  ];
  const attempts = el('table', 'attempts');
  attempts.append(el('tr', null, null, ...['attempt', 'status', 'worker', 'sandbox', 'started', 'ended', 'why it ended'].map((h) => el('th', null, h))));
  for (const a of d.attempts) {
    const tr = el('tr', a.status === 'committed' ? null : 'bad');
    tr.append(
      el('td', null, a.attempt),
      el('td', null, null, statusOf(a.status)),
      el('td', null, a.workerId),
      el('td', 'mono', a.sandbox ?? '–'),
      el('td', null, time(a.startedAt)),
      el('td', null, time(a.endedAt)),
      el('td', a.errorCode ? 'fault' : null, a.errorCode ? `${a.errorCode}: ${a.error ?? ''}` : a.status),
    );
    attempts.append(tr);
  }
  parts.push(el('h3', null, 'Attempts'), attempts);
  parts.push(el('h3', null, 'Messages and replies'));
  for (const m of [...d.messages, ...d.replies]) {
    const code = exitCodeOf(m);
    const line = el('div', `msg ${m.direction}${code ? ' bad' : ''}`, `#${m.id} ${m.direction === 'in' ? '→' : '←'} `);
    line.append(statusOf(m.status, code));
    if (code !== null) line.append(el('span', code === 0 ? 'exit' : 'exit nonzero', ` exit ${code}`));
    line.append(el('pre', 'text', m.text));
    parts.push(line);
  }
  if (Object.keys(d.state).length) parts.push(el('h3', null, 'State it wrote'), el('pre', null, JSON.stringify(d.state, null, 2)));
  return parts;
}

/** The files a committed turn added, changed and deleted: text diffs coloured by line, sizes for the rest. */
async function diffOf(sessionId, turnId) {
  const box = el('div', 'diff');
  let diff;
  try {
    diff = await api(path(sessionId, `/turns/${encodeURIComponent(turnId)}/diff`));
  } catch (err) {
    box.append(el('p', 'error', errorText(err)));
    return box;
  }
  const c = diff.counts;
  box.append(el('h3', null, `Diff (v${diff.version - 1} → v${diff.version}): ${c.added} added, ${c.modified} modified, ${c.deleted} deleted, ${c.renamed} renamed`));
  if (diff.files.length === 0) box.append(el('p', 'muted', 'No file changed.'));
  for (const f of diff.files) {
    const file = el('div', `file change-${f.change}`);
    file.dataset.path = f.path;
    const size = (s) => (s ? `${s.size} B` : '–');
    const name = f.from ? `${f.from} → ${f.path}` : f.path;
    file.append(el('div', 'file-head', `${f.change} ${name}  (${size(f.before)} → ${size(f.after)})`));
    if (f.binary) file.append(el('p', 'muted', `binary: ${size(f.before)} → ${size(f.after)}`));
    else if (f.truncated) file.append(el('p', 'muted', 'text diff left out (too large)'));
    else if (f.diff) {
      const pre = el('pre', 'patch');
      for (const line of f.diff.split('\n')) {
        const cls = line.startsWith('@@') ? 'hunk' : line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : null;
        pre.append(el('span', cls, `${line}\n`));
      }
      file.append(pre);
    }
    box.append(file);
  }
  return box;
}

// ---- files at a version

/** The latest listing asked for: an older answer that arrives after it is dropped. */
let listing = 0;

export async function showFiles(sessionId, version, dir) {
  const asked = ++listing;
  const table = $('#s-files');
  const shown = $('#s-file');
  shown.hidden = true;
  if (version === null) {
    table.replaceChildren();
    $('#s-files-path').textContent = 'no workspace history';
    return;
  }
  $('#s-files-version').value = String(version);
  $('#s-files-path').textContent = `v${version}:/${dir}`;
  const qs = new URLSearchParams({ version: String(version), path: dir });
  let info;
  try {
    info = await api(`${path(sessionId, '/files')}?${qs}`);
  } catch (err) {
    if (asked !== listing) return;
    table.replaceChildren(el('tr', null, null, el('td', 'error', errorText(err))));
    return;
  }
  if (asked !== listing) return;
  table.replaceChildren();
  table.dataset.version = String(version);
  table.dataset.path = dir;
  if (dir) {
    const up = dir.split('/').slice(0, -1).join('/');
    table.append(entryRow('..', 'dir', '', () => showFiles(sessionId, version, up)));
  }
  for (const e of info.entries ?? []) {
    const full = dir ? `${dir}/${e.name}` : e.name;
    const open =
      e.type === 'dir' ? () => showFiles(sessionId, version, full) : e.type === 'file' ? () => openFile(sessionId, version, full) : null;
    table.append(entryRow(e.name, e.type, e.type === 'link' ? `→ ${e.target}` : e.type === 'file' ? `${e.size} B` : '', open));
  }
}

function entryRow(name, type, detail, open) {
  const tr = el('tr', `entry ${type}`);
  tr.dataset.name = name;
  tr.append(el('td', null, null, open ? button(type === 'dir' ? `${name}/` : name, open, 'link') : name), el('td', null, type), el('td', null, detail));
  return tr;
}

/** A file's bytes: shown as text when they are UTF-8 without NUL, else only its size. */
async function openFile(sessionId, version, file) {
  const shown = $('#s-file');
  shown.hidden = false;
  shown.dataset.path = file;
  const qs = new URLSearchParams({ version: String(version), path: file });
  try {
    const res = await api(`${path(sessionId, '/files')}?${qs}`, { raw: true });
    const bytes = new Uint8Array(await res.arrayBuffer());
    let text = null;
    try {
      text = bytes.includes(0) ? null : new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      // Not UTF-8: sizes only, like the diff.
    }
    shown.textContent = text ?? `binary file, ${formatBytes(bytes.length)}`;
  } catch (err) {
    shown.textContent = errorText(err);
  }
}
