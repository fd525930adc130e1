import { spawnSync } from "node:child_process";

/** An outside program a suite runs (redis-server, promtool, amtool), and what to do without it. */
export interface RequiredTool {
  /** Where it was found; undefined when it was not. */
  path: string | undefined;
  /**
   * Whether the suite is skipped: only where the tool is missing and this is not CI. Under CI
   * (`process.env.CI`) a missing tool fails the suite instead, because a check that silently does
   * not run looks exactly like one that passed.
   */
  skip: boolean;
  /** For the suite's title: where the tool is, or why the suite does not run and how to fix it. */
  note: string;
  /** For the suite's `beforeAll`: throws the install hint when the tool is missing. */
  ensure: () => void;
}

/**
 * Says whether the suite can run with `name` at `path` (undefined: not found where `lookedIn`
 * says), naming the Debian package that provides it. Locally a missing tool skips the suite with
 * that reason printed; under CI it fails it with the same words.
 */
export function requiredTool(
  name: string,
  path: string | undefined,
  debianPackage: string,
  lookedIn = "PATH",
): RequiredTool {
  const missing = `${name} not found (looked on ${lookedIn}): it comes with Debian's ${debianPackage} package (apt-get install ${debianPackage}; .ci/run provides it)`;
  const skip = path === undefined && !process.env.CI;
  if (skip) console.warn(`skipped: ${missing}`);
  return {
    path,
    skip,
    note: path ?? (skip ? `skipped, ${missing}` : missing),
    ensure: () => {
      if (path === undefined)
        throw new Error(`${missing}; under CI a missing tool fails the suite instead of skipping it`);
    },
  };
}

/** `name` when it runs from PATH (it answers `--version`), else undefined. */
export function onPath(name: string): string | undefined {
  return spawnSync(name, ["--version"]).error === undefined ? name : undefined;
}
