import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The layers of lib/ (docs/architecture.md, "Layers"), checked by reading the imports of every
 * product file: no two lib folders import each other, no import cycle between lib modules, and
 * nothing in lib imports app/ or workers/. Imports are read as text (static `import`/`export …
 * from`, side-effect `import "…"`, dynamic and type-position `import("…")`), `import type`
 * included: a type that points up is a dependency that points up.
 *
 * And one name, one meaning: no exported name is declared in two lib files. Two declarations of
 * one name are either the same thing (declared once, imported by the other) or two things (one of
 * them renamed to say what it is).
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const LIB = path.join(ROOT, "lib");
/** Root files (lib/env.ts, lib/log.ts…) count as one folder of their own, at the bottom. */
const ROOT_FOLDER = "(root)";

/**
 * The layers, bottom first (docs/architecture.md, "Layers"). A folder imports only folders of its
 * own layer or below; a new folder has to be placed here before the test passes.
 */
const LAYERS: readonly (readonly string[])[] = [
  ["core", "format", "catalog", ROOT_FOLDER],
  ["db", "redis", "tracing", "metrics", "security", "dependencies", "tenants", "categories"],
  ["budgets", "ratelimit", "quota", "auth", "audit", "http"],
  ["modelcalls", "queues", "marketplace", "webhooks", "answers"],
  ["jobs"],
  ["projection"],
  ["diagnosis"],
  ["job-views"],
  ["runs", "imports", "reasks", "documents", "invoices", "agents", "syncs", "generations", "progress", "retention"],
  ["actions"],
  ["reports"],
];

const SPECIFIER = /\bfrom\s*["']([^"']+)["']|\bimport\s*["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)/g;

interface Edge {
  from: string;
  to: string;
}

/** Every product file under `dir` (tests and declarations left out), as paths relative to the checkout. */
function productFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return productFiles(full);
    const isSource = /\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name) && !name.endsWith(".d.ts");
    return isSource ? [path.relative(ROOT, full)] : [];
  });
}

/** The source without comments, so an import quoted in a doc comment is not read as one. */
function withoutComments(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

/** What a specifier names, relative to the checkout; undefined for a package (`zod`, `node:fs`). */
function resolve(file: string, specifier: string): string | undefined {
  let target: string;
  if (specifier.startsWith("@/")) target = specifier.slice(2);
  else if (specifier.startsWith(".")) target = path.join(path.dirname(file), specifier);
  else return undefined;
  const candidates = [target, `${target}.ts`, `${target}.tsx`, path.join(target, "index.ts")];
  return candidates.find((c) => existsSync(path.join(ROOT, c)) && statSync(path.join(ROOT, c)).isFile()) ?? target;
}

/** Every import of every lib product file that names a file of this checkout. */
function importEdges(): Edge[] {
  return productFiles(LIB).flatMap((file) => {
    const source = withoutComments(readFileSync(path.join(ROOT, file), "utf8"));
    return [...source.matchAll(SPECIFIER)].flatMap((m) => {
      const to = resolve(file, (m[1] ?? m[2] ?? m[3])!);
      return to === undefined ? [] : [{ from: file, to }];
    });
  });
}

/** `lib/ratelimit/breaker.ts` → `ratelimit`; `lib/env.ts` → `(root)`. */
function folderOf(file: string): string {
  const parts = file.split(path.sep);
  return parts.length > 2 ? parts[1]! : ROOT_FOLDER;
}

const isLib = (file: string) => file.startsWith(`lib${path.sep}`);

/** Pairs of folders that import each other, each with the imports both ways. */
function twoWayFolders(edges: Edge[]): string[] {
  const between = new Map<string, Edge[]>();
  for (const edge of edges.filter((e) => isLib(e.to))) {
    const [a, b] = [folderOf(edge.from), folderOf(edge.to)];
    if (a === b) continue;
    const key = `${a} -> ${b}`;
    between.set(key, [...(between.get(key) ?? []), edge]);
  }
  const pairs: string[] = [];
  for (const [key, forward] of between) {
    const [a, b] = key.split(" -> ") as [string, string];
    const backward = between.get(`${b} -> ${a}`);
    if (!backward || a > b) continue;
    const lines = [...forward, ...backward].map((e) => `    ${e.from} imports ${e.to}`);
    pairs.push([`${a} <-> ${b}:`, ...lines].join("\n"));
  }
  return pairs.sort();
}

/** The import cycles between lib modules: each strongly connected set of two or more files (Tarjan). */
function fileCycles(edges: Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges.filter((e) => isLib(e.to))) next.set(from, [...(next.get(from) ?? []), to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (file: string) => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const to of next.get(file) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(file, Math.min(low.get(file)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(file, Math.min(low.get(file)!, index.get(to)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const members: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      members.push(member);
    } while (member !== file);
    if (members.length > 1) cycles.push(members.sort());
  };
  for (const file of next.keys()) if (!index.has(file)) visit(file);
  return cycles;
}

/**
 * A top-level exported declaration: `export interface X`, `export type X`, `export [async]
 * function[*] X`, `export const|let|var X`, `export [abstract] class X`, `export [const] enum X`
 * (`declare` allowed). Re-exports (`export { X } from …`, `export type { X }`) declare nothing and
 * are not read; nor is an `export` indented inside a `declare module` or namespace block.
 */
const EXPORTED_DECLARATION =
  /^export\s+(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:const\s+enum|interface|type|function|const|let|var|class|enum)[\s*]+([A-Za-z_$][\w$]*)/gm;

/** Each name exported by a declaration in a lib product file, with the files that declare it. */
function exportedDeclarations(): Map<string, string[]> {
  const filesOf = new Map<string, string[]>();
  for (const file of productFiles(LIB)) {
    const source = withoutComments(readFileSync(path.join(ROOT, file), "utf8"));
    const names = new Set([...source.matchAll(EXPORTED_DECLARATION)].map((m) => m[1]!));
    for (const name of names) filesOf.set(name, [...(filesOf.get(name) ?? []), file]);
  }
  return filesOf;
}

describe("lib's layers", () => {
  const edges = importEdges();

  it("reads the imports it checks (a sanity check of the reader)", () => {
    expect(
      edges.some(
        (e) =>
          e.from === path.join("lib", "metrics", "metrics.ts") && e.to === path.join("lib", "catalog", "catalog.ts"),
      ),
    ).toBe(true);
  });

  it("no two lib folders import each other", () => {
    const pairs = twoWayFolders(edges);
    expect(
      pairs,
      `lib folders that import each other (one of the two directions must go):\n${pairs.join("\n")}`,
    ).toEqual([]);
  });

  it("every lib folder has a layer, and imports only its own layer or those below", () => {
    const layerOf = new Map(LAYERS.flatMap((folders, i) => folders.map((f) => [f, i] as const)));
    const folders = new Set(productFiles(LIB).map(folderOf));
    const unplaced = [...folders].filter((f) => !layerOf.has(f)).sort();
    expect(
      unplaced,
      `lib folders missing from LAYERS in lib/structure.test.ts (place each one):\n  ${unplaced.join("\n  ")}`,
    ).toEqual([]);
    const upward = edges
      .filter((e) => isLib(e.to) && layerOf.get(folderOf(e.to))! > layerOf.get(folderOf(e.from))!)
      .map((e) => `  ${e.from} (${folderOf(e.from)}) imports ${e.to} (${folderOf(e.to)}, a higher layer)`);
    expect(upward, `lib imports that point up the layers:\n${upward.join("\n")}`).toEqual([]);
  });

  it("lib folders form no cycle, however long", () => {
    const between = edges
      .filter((e) => isLib(e.to) && folderOf(e.from) !== folderOf(e.to))
      .map((e) => ({ from: path.join("lib", folderOf(e.from)), to: path.join("lib", folderOf(e.to)) }));
    const cycles = fileCycles(between).map((members) => `  ${members.join(" -> ").replaceAll(`lib${path.sep}`, "")}`);
    expect(cycles, `lib folders that import each other around a cycle:\n${cycles.join("\n")}`).toEqual([]);
  });

  it("no import cycle between lib modules", () => {
    const cycles = fileCycles(edges).map((members) => `  ${members.join(", ").replaceAll(path.sep, "/")}`);
    expect(cycles, `lib modules that import each other, directly or around a cycle:\n${cycles.join("\n")}`).toEqual([]);
  });

  it("nothing in lib imports app/ or workers/", () => {
    const upward = edges.filter((e) => /^(app|workers)[/\\]/.test(e.to)).map((e) => `  ${e.from} imports ${e.to}`);
    expect(
      upward,
      `lib files importing app/ or workers/ (those import lib, never the reverse):\n${upward.join("\n")}`,
    ).toEqual([]);
  });
});

describe("lib's exported names", () => {
  const declared = exportedDeclarations();

  it("reads the exported declarations it checks (a sanity check of the reader)", () => {
    const metrics = path.join("lib", "metrics", "metrics.ts");
    for (const name of ["QueueGaugeReading", "ListCallAllowances", "QUEUE_GAUGE_STATES", "createMetrics"])
      expect(declared.get(name), name).toContain(metrics);
  });

  it("no exported name is defined twice across lib/ (one name, one meaning)", () => {
    const twice = [...declared]
      .filter(([, files]) => files.length > 1)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, files]) => `  ${name}: ${files.map((f) => f.replaceAll(path.sep, "/")).join(", ")}`);
    expect(
      twice,
      `exported names defined in more than one lib file (the same thing: define it once and import it; two things: give one a name that says what it is):\n${twice.join("\n")}`,
    ).toEqual([]);
  });
});
