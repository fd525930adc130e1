/**
 * `npm test` after the type and lint checks: the unit and integration tests (vitest), then the
 * browser tests (Playwright). The web app's build, which every browser test's system serves, is
 * made while vitest runs, at the lowest CPU priority: it takes only the time the tests leave idle
 * (they wait on timers, PostgreSQL and Redis), and the browser tests find it made. A failed build
 * prints its output and fails the run, as it would have under the browser tests.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { setPriority } from "node:os";
import { join } from "node:path";
import { needsBuild } from "./build";

const root = join(import.meta.dirname, "..");
const bin = (name: string) => join(root, "node_modules/.bin", name);

/** Runs a command to its end; its exit code (1 for a signal). */
function exitOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => child.on("close", (code) => resolve(code ?? 1)));
}

/** `next build` in the background at nice 19, its output kept to print if it fails. */
function buildBeside(): { done: Promise<number>; output: Buffer[]; child: ChildProcess } {
  const output: Buffer[] = [];
  const child = spawn(process.execPath, [join(root, "node_modules/next/dist/bin/next"), "build"], {
    cwd: root,
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (child.pid) setPriority(child.pid, 19);
  child.stdout?.on("data", (chunk: Buffer) => output.push(chunk));
  child.stderr?.on("data", (chunk: Buffer) => output.push(chunk));
  return { done: exitOf(child), output, child };
}

const build = needsBuild(root) ? buildBeside() : undefined;
const unit = await exitOf(spawn(bin("vitest"), ["run"], { cwd: root, stdio: "inherit" }));
if (unit !== 0) {
  build?.child.kill("SIGTERM");
  process.exit(unit);
}
if (build) {
  const built = await build.done;
  if (built !== 0) {
    process.stderr.write(Buffer.concat(build.output));
    console.error(`next build failed (exit ${built}): the browser tests need the web app's build.`);
    process.exit(built);
  }
  console.log("The web app's build, made beside the tests, is ready for the browser tests.");
}
process.exit(await exitOf(spawn(bin("playwright"), ["test"], { cwd: root, stdio: "inherit" })));
