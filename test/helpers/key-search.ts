import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

/**
 * A shell job that looks for a key inside a sandbox: every process's environment and
 * command line, the files under the places a key could be left (/run, /workspace, /tmp,
 * /opt, /etc, /home, /root, /usr/local) and its own environment. Prints KEY-ABSENT, or
 * KEY-FOUND and where. The key and the verdicts are split in the command, so only the
 * job's output holds them whole (its own command line cannot match).
 */
export function keySearch(key: string): string {
  const half = Math.floor(key.length / 2);
  return [
    `K='${key.slice(0, half)}''${key.slice(half)}'`,
    'found=""',
    'for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do grep -qsF "$K" "$f" && found="$found $f"; done',
    'hits=$(grep -rlsF "$K" /run /workspace /tmp /opt /etc /home /root /usr/local 2>/dev/null)',
    'env | grep -qF "$K" && found="$found env"',
    'if [ -z "$found$hits" ]; then echo "KEY-""ABSENT"; else echo "KEY-""FOUND $found $hits"; fi',
  ].join('\n');
}

/**
 * The files under each of `roots` on the host whose bytes hold `key` (a gzip file, a layer
 * archive or a blob store object, searched in its uncompressed bytes too), and how many
 * files each root held: the caller says which roots must hold some, as a search of an
 * empty dir proves nothing. A root that is not there throws (the search looks in the wrong place).
 */
export async function hostFilesHolding(
  key: string,
  roots: string[],
): Promise<{ holding: string[]; searched: Record<string, number> }> {
  const needle = Buffer.from(key);
  const holding: string[] = [];
  const searched: Record<string, number> = {};
  for (const root of roots) {
    const files = await filesUnder(root);
    searched[root] = files.length;
    for (const file of files) {
      const bytes = await readFile(file);
      const gzip = bytes[0] === 0x1f && bytes[1] === 0x8b;
      if (bytes.includes(needle) || (gzip && gunzipSync(bytes).includes(needle))) holding.push(file);
    }
  }
  return { holding, searched };
}

/** Every regular file under `dir`, symlinks not followed; a dir that is not there throws. */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const d of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, d.name);
    if (d.isDirectory()) out.push(...(await filesUnder(path)));
    else if (d.isFile()) out.push(path);
  }
  return out;
}
