import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The docs stay current with the code they name: every relative link of README.md and docs/*.md
 * leads to a file (and a `#anchor` to one of its headings), every path of the checkout a doc
 * names in backticks (`lib/runs/outcome.ts`, `ops/prometheus/alerts.yml`) exists, and every
 * setting or constant a doc names in backticks (`BOUNDED_TIME_SCALE`, `MAX_CRASH_RESUMES`) is
 * still named by the code, its configuration or its environment example.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const DOCS = [
  "README.md",
  ...readdirSync(path.join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];
const TOP_FOLDERS = ["lib", "app", "workers", "bench", "scripts", "ops", "e2e", "test", "prisma", "docs"];

const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");
const withoutFences = (text: string) => text.replace(/^```[\s\S]*?^```/gm, "");

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading] of withoutFences(read(file)).matchAll(/^#{1,6} (.*)$/gm)) {
    const slug = heading!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, "")
      .replaceAll(" ", "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

function brokenLinks(file: string): string[] {
  return [...withoutFences(read(file)).matchAll(/\]\(([^)\s]+)\)/g)].flatMap(([, target]) => {
    if (/^[a-z]+:/.test(target!)) return [];
    const [linked, anchor] = target!.split("#") as [string, string | undefined];
    const dest = linked === "" ? file : path.normalize(path.join(path.dirname(file), linked));
    if (!existsSync(path.join(ROOT, dest))) return [`${file}: ${target}: no such file`];
    if (anchor && dest.endsWith(".md") && !anchors(dest).has(anchor))
      return [`${file}: ${target}: no heading #${anchor} in ${dest}`];
    return [];
  });
}

/** Backticked paths of the checkout (`lib/…`, `ops/…`), a `:line` or `#L12` suffix dropped; globs and placeholders left out. */
function missingPaths(file: string): string[] {
  const pattern = new RegExp(`\`((?:${TOP_FOLDERS.join("|")})/[^\`\\s*<>{}]+?)(?::\\d+)?\``, "g");
  return [...read(file).matchAll(pattern)]
    .map(([, named]) => named!.replace(/[.,;]$/, ""))
    .filter((named) => !existsSync(path.join(ROOT, named)))
    .map((named) => `${file}: \`${named}\` does not exist`);
}

/** Where a setting or constant a doc names must still appear. */
const SOURCE_FOLDERS = ["lib", "app", "workers", "bench", "scripts", "test", "e2e", "ops", ".ci"];
const SOURCE_FILES = [".env.example", "playwright.config.ts", "vitest.config.ts", "package.json"];
const SOURCE_EXTENSIONS = /\.(ts|tsx|mjs|js|ya?ml|json|sh|lua)$|^run$/;

function sourceText(): string {
  const texts: string[] = SOURCE_FILES.filter((f) => existsSync(path.join(ROOT, f))).map(read);
  const walk = (dir: string) => {
    for (const entry of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else if (SOURCE_EXTENSIONS.test(entry.name) && !entry.name.endsWith(".md")) texts.push(read(rel));
    }
  };
  for (const dir of SOURCE_FOLDERS) if (existsSync(path.join(ROOT, dir))) walk(dir);
  return texts.join("\n");
}

/** Backticked UPPER_SNAKE names (two parts at least): settings and constants; placeholders (`<KIND>`) left out. */
function namesOf(file: string): string[] {
  return [...read(file).matchAll(/`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`/g)].map(([, name]) => name!);
}

describe("the docs", () => {
  it("reads README.md and the docs folder", () => {
    expect(DOCS).toContain("docs/architecture.md");
  });

  it("link only to files and headings that exist", () => {
    const broken = DOCS.flatMap(brokenLinks);
    expect(broken, `broken links:\n  ${broken.join("\n  ")}`).toEqual([]);
  });

  it("name only settings and constants the code still has", () => {
    const source = sourceText();
    const gone = [
      ...new Set(
        DOCS.flatMap((file) =>
          namesOf(file)
            .filter((name) => !source.includes(name))
            .map((name) => `${file}: \`${name}\``),
        ),
      ),
    ];
    expect(
      gone,
      `settings or constants named in the docs that the code no longer names:\n  ${gone.join("\n  ")}`,
    ).toEqual([]);
  });

  it("name only paths of the checkout that exist", () => {
    const missing = [...new Set(DOCS.flatMap(missingPaths))];
    expect(missing, `paths named in the docs that are not in the checkout:\n  ${missing.join("\n  ")}`).toEqual([]);
  });
});
