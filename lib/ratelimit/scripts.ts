import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { formatDuration } from "@/lib/format/duration";
import type { RedisClient } from "@/lib/redis/client";

/** A Lua script of this folder, with the SHA1 that EVALSHA names it by. */
export interface LuaScript {
  source: string;
  sha: string;
}

const loaded = new Map<string, LuaScript>();

/**
 * A Lua script of lib/ratelimit, read once. A bundle (Next.js) may not keep the file beside this
 * module, so the project root (the working directory of every Bounded process) is the fallback.
 */
export function luaScript(fileName: string): LuaScript {
  let script = loaded.get(fileName);
  if (!script) {
    let source: string;
    try {
      source = readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), fileName), "utf8");
    } catch {
      source = readFileSync(path.join(process.cwd(), "lib/ratelimit", fileName), "utf8");
    }
    script = { source, sha: createHash("sha1").update(source).digest("hex") };
    loaded.set(fileName, script);
  }
  return script;
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

/** Rejects when `promise` has not settled within `ms`: a Redis that does not answer counts as down. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Redis did not answer within ${formatDuration(ms)}`)), ms);
    timer.unref();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
