import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ENV_VARIABLES, parseEnv } from "./env";

const example = readFileSync(`${import.meta.dirname}/../.env.example`, "utf8");
const listed = new Map(
  example
    .split("\n")
    .filter((l) => /^[A-Z_]+=/.test(l))
    .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)] as const),
);

describe(".env.example", () => {
  it("lists every variable the environment schema reads (NODE_ENV aside)", () => {
    const missing = ENV_VARIABLES.filter((v) => v !== "NODE_ENV" && !listed.has(v));
    expect(missing).toEqual([]);
  });

  it("lists no variable the schema does not know", () => {
    expect([...listed.keys()].filter((v) => !(ENV_VARIABLES as string[]).includes(v))).toEqual([]);
  });

  it("shows the defaults the schema really uses", () => {
    const fromExample = parseEnv(Object.fromEntries(listed));
    const defaults = parseEnv({});
    expect(fromExample).toEqual(defaults);
  });
});
