import type { Redis } from "ioredis";
import { createRedis, type RedisClient } from "@/lib/redis/client";

/**
 * Runs `read` on a connection of its own and returns what it did, with the commands that
 * connection sent, lower-case, as Redis's MONITOR (on `watcher`) saw them.
 */
export async function commandsSent<T>(
  watcher: RedisClient,
  read: (reader: RedisClient) => Promise<T>,
): Promise<{ result: T; sent: string[] }> {
  const reader = createRedis("producer", { enableOfflineQueue: true });
  const monitor = await (watcher as Redis).monitor();
  try {
    const info = (await reader.call("CLIENT", "INFO")) as string;
    const address = / addr=(\S+)/.exec(info)![1];
    const sent: string[] = [];
    monitor.on("monitor", (_time: string, args: string[], source: string) => {
      if (source === address) sent.push(args[0]!.toLowerCase());
    });
    const result = await read(reader);
    await watcher.ping(); // MONITOR's lines arrive in order: the reader's are in once this answers
    return { result, sent };
  } finally {
    monitor.disconnect();
    reader.disconnect();
  }
}
