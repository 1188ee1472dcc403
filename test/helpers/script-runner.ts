import { spawnSync } from 'node:child_process';

/** Runs a set-up script (or any command) in `cwd` with `env` (plus a call's own), output and exit code together. */
export function scriptRunner(env: NodeJS.ProcessEnv, cwd: string) {
  return (argv: string[], extraEnv: Record<string, string> = {}) => {
    const r = spawnSync(argv[0]!, argv.slice(1), { env: { ...env, ...extraEnv }, encoding: 'utf8', cwd });
    return { code: r.status, out: `${r.stdout}${r.stderr}` };
  };
}
