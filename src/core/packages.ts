/**
 * An agent's own packages, built into its agent image: Debian (bookworm) packages by name
 * and npm packages at an exact version.
 *
 * Invariants:
 * - An npm package names one version (`name@1.2.3`), never a range, a tag or a URL: the
 *   image's tag is a hash of the recipe, so the recipe must name bytes. Anything else is
 *   refused with what is wrong and how to pin it.
 * - A Debian package is a name alone (it is installed from the suite the base image is
 *   built from); no name may start with `-`, so none reads as an option of the build.
 */
import { z } from 'zod';

/** Debian policy: lower-case letters, digits, `+ - .`, at least two, starting alphanumeric. */
const DEBIAN_NAME = /^[a-z0-9][a-z0-9+.-]+$/;
/** npm's rules for new names: lower case, URL-safe, an optional @scope. */
const NPM_NAME = /^(?:@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/;
/** An exact semver version: major.minor.patch with an optional pre-release and build. */
const EXACT_VERSION = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;
/** Most packages an agent may name, each kind. */
export const MAX_AGENT_PACKAGES = 64;

/** Why `spec` is not an npm package pinned to an exact version (name@1.2.3), or null when it is. */
export function npmPinProblem(spec: string): string | null {
  // A scope's leading @ is part of the name; the version follows the last @.
  const at = spec.lastIndexOf('@');
  const name = at > 0 ? spec.slice(0, at) : spec;
  const version = at > 0 ? spec.slice(at + 1) : '';
  if (!NPM_NAME.test(name))
    return `${spec} is not an npm package name@version (lower-case name, optional @scope/, then @ and an exact version such as 1.2.3)`;
  const how = `pin an exact version, e.g. ${name}@1.2.3 (\`npm view ${name} version\` prints the latest)`;
  if (!version) return `${spec} names no version: ${how}`;
  if (!EXACT_VERSION.test(version)) return `${spec}: "${version}" is a range or a tag, not a version: ${how}`;
  return null;
}

/** Why `name` is not a Debian package name, or null when it is. */
export function debianNameProblem(name: string): string | null {
  return DEBIAN_NAME.test(name)
    ? null
    : `${name} is not a Debian package name (lower-case letters, digits, + - ., at least two characters; no version: the suite's is installed)`;
}

const pinnedNpm = z.string().superRefine((spec, ctx) => {
  const problem = npmPinProblem(spec);
  if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
});
const debianName = z.string().superRefine((name, ctx) => {
  const problem = debianNameProblem(name);
  if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
});

export const agentPackagesSchema = z
  .object({
    /** Debian packages (bookworm), by name. @default [] */
    apt: z.array(debianName).max(MAX_AGENT_PACKAGES).optional(),
    /** npm packages, each name@exact-version. @default [] */
    npm: z.array(pinnedNpm).max(MAX_AGENT_PACKAGES).optional(),
  })
  .strict();
export type AgentPackages = z.output<typeof agentPackagesSchema>;
