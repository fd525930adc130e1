/**
 * Whether the web app needs `next build`: there is no build, or a source the web uses is newer
 * than it. Shared by `npm start` and the chaos run, which serve the same build.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

function newestMtime(path: string): number {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const entry of readdirSync(path)) {
    if (entry === "node_modules" || entry.startsWith(".")) continue;
    newest = Math.max(newest, newestMtime(join(path, entry)));
  }
  return newest;
}

export function needsBuild(root: string): boolean {
  const buildId = join(root, ".next/BUILD_ID");
  if (!existsSync(buildId)) return true;
  const built = statSync(buildId).mtimeMs;
  const sources = ["app", "lib", "generated", "next.config.js", "package-lock.json", "tsconfig.json"].map((p) =>
    join(root, p),
  );
  return sources.some((p) => newestMtime(p) > built);
}
