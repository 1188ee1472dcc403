// The host's Debian mirror for a suite, read from its apt sources (one-line `.list` and deb822
// `.sources`), so debootstrap uses the mirror this machine is known to reach.
//
// Invariants:
// - `parseAptMirror` is pure: the first enabled `deb` source of the suite with component `main`
//   and an http(s)/file URI wins, in the order the files are given; trailing slashes are dropped.
// - Files are read in apt's order (sources.list, then sources.list.d sorted by name); unreadable
//   ones are skipped, and with no match the build falls back to deb.debian.org.
import * as fs from 'node:fs/promises';
import path from 'node:path';

const DEFAULT_MIRROR = 'http://deb.debian.org/debian';

/** The host's Debian mirror for `suite` from its apt sources, so the build uses the same (reachable) one. */
export async function debianMirror(suite: string): Promise<string> {
  const files = ['/etc/apt/sources.list'];
  try {
    const dir = '/etc/apt/sources.list.d';
    const names = (await fs.readdir(dir)).filter((n) => n.endsWith('.list') || n.endsWith('.sources'));
    files.push(...names.sort().map((n) => path.join(dir, n)));
  } catch {
    // no sources.list.d
  }
  const sources: AptSourceFile[] = [];
  for (const file of files) {
    try {
      sources.push({ deb822: file.endsWith('.sources'), text: await fs.readFile(file, 'utf8') });
    } catch {
      // unreadable or missing: skip it
    }
  }
  return parseAptMirror(sources, suite) ?? DEFAULT_MIRROR;
}

export interface AptSourceFile {
  /** true for `.sources` (deb822 stanzas), false for one-line `.list` syntax */
  deb822: boolean;
  text: string;
}

/** First enabled `deb` source of `suite` with component main and an http(s)/file URI. */
export function parseAptMirror(files: readonly AptSourceFile[], suite: string): string | undefined {
  const usable = (uri: string) => /^(https?|file):/.test(uri);
  for (const file of files) {
    if (file.deb822) {
      for (const stanza of file.text.split(/\n\s*\n/)) {
        const fields = parseDeb822Stanza(stanza);
        const list = (name: string) => (fields.get(name) ?? '').split(/\s+/).filter(Boolean);
        if (fields.get('enabled')?.toLowerCase() === 'no') continue;
        if (!list('types').includes('deb') || !list('suites').includes(suite)) continue;
        if (!list('components').includes('main')) continue;
        const uri = list('uris').find(usable);
        if (uri) return uri.replace(/\/+$/, '');
      }
    } else {
      for (const raw of file.text.split('\n')) {
        const line = raw.replace(/#.*/, '').replace(/\[[^\]]*\]/, ' ');
        const [type, uri, lineSuite, ...components] = line.trim().split(/\s+/);
        if (type === 'deb' && uri && usable(uri) && lineSuite === suite && components.includes('main')) {
          return uri.replace(/\/+$/, '');
        }
      }
    }
  }
  return undefined;
}

function parseDeb822Stanza(stanza: string): Map<string, string> {
  const fields = new Map<string, string>();
  let current: string | undefined;
  for (const line of stanza.split('\n')) {
    if (line.startsWith('#')) continue;
    if (/^\s/.test(line) && current) {
      fields.set(current, `${fields.get(current)} ${line.trim()}`);
      continue;
    }
    const match = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
    if (match) {
      current = match[1]!.toLowerCase();
      fields.set(current, match[2]!.trim());
    }
  }
  return fields;
}
