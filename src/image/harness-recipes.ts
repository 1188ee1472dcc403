// What each harness adds to the base image: its npm packages at exact versions, the
// executables it is started by (linked into /usr/local/bin), and Debian packages.
//
// Invariants:
// - Versions are exact: a recipe names bytes, not a range, so its hash names the image.
// - An executable is linked to the native binary of this machine's platform package when
//   the harness ships one (npm install scripts are not run: they would copy it over a
//   placeholder), so nothing a harness's package runs at install time runs on the host.
import type { HarnessName } from '../core/index.js';

export interface HarnessRecipe {
  /** name@exact-version, installed from the npm registry. */
  npm: readonly string[];
  /** /usr/local/bin/<name> → path under the harness node_modules, per CPU architecture. */
  bins: Readonly<Record<string, Partial<Record<NodeJS.Architecture, string>>>>;
  /** Debian packages (bookworm) the harness needs beyond the base image. */
  apt: readonly string[];
}

export const HARNESS_RECIPES: Readonly<Record<HarnessName, HarnessRecipe>> = {
  'claude-code': {
    npm: ['@anthropic-ai/claude-code@2.1.332'],
    // The native binary (Bun-compiled, needs no Node); the wrapper package's bin is a placeholder.
    bins: {
      claude: {
        x64: '@anthropic-ai/claude-code-linux-x64/claude',
        arm64: '@anthropic-ai/claude-code-linux-arm64/claude',
      },
    },
    apt: [],
  },
  codex: {
    npm: ['@openai/codex@0.171.0'],
    // The Node launcher finds the platform binary and puts its ripgrep on PATH.
    bins: { codex: { x64: '@openai/codex/bin/codex.js', arm64: '@openai/codex/bin/codex.js' } },
    apt: [],
  },
  opencode: {
    npm: ['opencode-ai@1.18.33'],
    bins: {
      opencode: { x64: 'opencode-linux-x64/bin/opencode', arm64: 'opencode-linux-arm64/bin/opencode' },
    },
    // opencode downloads ripgrep from GitHub at its first search unless one is on PATH.
    apt: ['ripgrep'],
  },
};
