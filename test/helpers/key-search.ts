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
