import { createHash } from "node:crypto";
import type { RedisClient } from "./client";

/** A Lua script, with the SHA1 that EVALSHA names it by. */
export interface LuaScript {
  source: string;
  sha: string;
}

/** A script from its source text, named by its SHA1. */
export function luaSource(source: string): LuaScript {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

/** Runs a script by EVALSHA, and by EVAL when Redis does not know it yet (a restart, a new node). */
export function runLua<T>(
  client: RedisClient,
  script: LuaScript,
  keys: string[],
  args: (string | number)[],
): Promise<T> {
  return (client.evalsha(script.sha, keys.length, ...keys, ...args) as Promise<T>).catch((err: unknown) => {
    if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
    return client.eval(script.source, keys.length, ...keys, ...args) as Promise<T>;
  });
}
