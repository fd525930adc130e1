import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { ACTION_ACCESS, ROUTE_ACCESS } from "./access-rules";

const root = join(import.meta.dirname, "../..");

function files(dir: string, name: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return entry === "node_modules" ? [] : files(path, name);
    return entry === name ? [path] : [];
  });
}

/** `METHOD /api/...` for every exported handler of every route.ts. */
function routesInTree(): string[] {
  return files(join(root, "app"), "route.ts").flatMap((file) => {
    const path = `/${relative(join(root, "app"), file).replace(/\/route\.ts$/, "")}`;
    const text = readFileSync(file, "utf8");
    return [...text.matchAll(/export (?:const|async function|function) (GET|POST|PUT|PATCH|DELETE)\b/g)].map(
      (m) => `${m[1]} ${path}`,
    );
  });
}

/** `file#export` for every exported function of every "use server" file. */
function actionsInTree(): string[] {
  return files(join(root, "app"), "actions.ts").flatMap((file) => {
    const text = readFileSync(file, "utf8");
    if (!/^["']use server["']/m.test(text)) return [];
    const rel = relative(root, file);
    return [...text.matchAll(/export async function (\w+)/g)].map((m) => `${rel}#${m[1]}`);
  });
}

describe("every route and server action has an access rule", () => {
  it("no route handler without a rule, no rule without its route", () => {
    expect(routesInTree().sort()).toEqual(Object.keys(ROUTE_ACCESS).sort());
  });

  it("no server action without a rule, no rule without its action", () => {
    expect(actionsInTree().sort()).toEqual(Object.keys(ACTION_ACCESS).sort());
  });
});
