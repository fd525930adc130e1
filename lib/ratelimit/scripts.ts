import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { formatDuration } from "@/lib/format/duration";
import { type LuaScript, luaSource } from "@/lib/redis/lua";

/** Read once per file. */
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
    script = luaSource(source);
    loaded.set(fileName, script);
  }
  return script;
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
