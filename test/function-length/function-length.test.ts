import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import allowList from "./allow-list.json";

/**
 * Functions a person can hold in their head: no product function (lib/, app/, workers/, scripts/;
 * tests left out) over 80 lines, as Biome's `noExcessiveLinesPerFunction` counts them, except those
 * named in ./allow-list.json — each with why it is still long — and no more functions over 60 lines
 * than the list's ceiling, which only goes down (the goal is 15). Needs no database: it reads the
 * code.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const BIOME = path.join(ROOT, "node_modules", ".bin", "biome");
const PRODUCT = ["lib", "app", "workers", "scripts"];

interface Finding {
  /** `file:name`, the allow-list's key. */
  key: string;
  lines: number;
}

/** The functions over `maxLines` lines, each named by its file and the name on its first line. */
function longFunctions(maxLines: number): Finding[] {
  const config = readFileSync(path.join(import.meta.dirname, "biome-rule.json"), "utf8").replace(
    /"maxLines": \d+/,
    `"maxLines": ${maxLines}`,
  );
  const dir = path.join(ROOT, "node_modules", ".cache", `function-length-${maxLines}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "biome.json"), config);
  let out: string;
  try {
    out = execFileSync(
      BIOME,
      [
        "lint",
        `--config-path=${dir}`,
        "--only=complexity/noExcessiveLinesPerFunction",
        "--max-diagnostics=none",
        "--reporter=json",
        ...PRODUCT,
      ],
      { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] },
    );
  } catch (err) {
    // Biome exits 1 when it finds something; its report is on stdout all the same.
    out = (err as { stdout: string }).stdout;
  }
  const report = JSON.parse(out) as {
    diagnostics: { message: string; location: { path: string; start: { line: number } } }[];
  };
  return report.diagnostics.map((d) => {
    const file = d.location.path;
    const lines = readFileSync(path.join(ROOT, file), "utf8").split("\n");
    const at = d.location.start.line - 1;
    // An unnamed function (an arrow a factory returns) is named after the function it is in.
    const named = (line: string) =>
      /function\*?\s+([\w$]+)/.exec(line)?.[1] ??
      /(?:const|let)\s+([\w$]+)\s*[:=]/.exec(line)?.[1] ??
      /^\s*(?:async\s+)?(?!return\b)([\w$]+)\s*\(/.exec(line)?.[1];
    let name = named(lines[at] ?? "");
    for (let up = at - 1; !name && up >= 0; up--) {
      const outer = named(lines[up] ?? "");
      if (outer) name = `${outer} (the function it returns)`;
    }
    return { key: `${file}:${name ?? `line ${at + 1}`}`, lines: Number(/\((\d+)\)/.exec(d.message)?.[1]) };
  });
}

describe("function length", () => {
  const over80 = longFunctions(80);
  const allowed = allowList.over80 as Record<string, string>;

  it("no product function is over 80 lines unless the allow-list names it and says why", () => {
    const unlisted = over80.filter((f) => !(f.key in allowed)).map((f) => `${f.key} (${f.lines} lines)`);
    expect(
      unlisted,
      `split these, or name them in test/function-length/allow-list.json with why:\n  ${unlisted.join("\n  ")}`,
    ).toEqual([]);
  });

  it("the allow-list names only functions still over 80 lines (a function split is taken off it)", () => {
    const found = new Set(over80.map((f) => f.key));
    const stale = Object.keys(allowed).filter((key) => !found.has(key));
    expect(stale, `no longer over 80 lines: take them off the allow-list:\n  ${stale.join("\n  ")}`).toEqual([]);
  });

  it(`at most ${allowList.over60Ceiling} functions over 60 lines (the ceiling only goes down; the goal is 15)`, () => {
    const over60 = longFunctions(60);
    expect(over60.length, over60.map((f) => `${f.key} (${f.lines})`).join("\n")).toBeLessThanOrEqual(
      allowList.over60Ceiling,
    );
  });
});
