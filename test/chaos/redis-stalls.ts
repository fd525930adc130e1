/**
 * Stalls of the run's Redis as Redis itself measured them (its latency monitor, `LATENCY
 * HISTORY`). The run does not cause them, but a machine does: a disk busy with the run's
 * PostgreSQL can hold an append-only file's fsync past a second, and Redis then answers nobody
 * until it is done. To the web that is Redis down: a request waiting on it is answered 503 after
 * its 2 s, as the design says. So each stall Redis reports is an outage window like the ones the
 * run opens, named for what Redis said, and the report prints them. Sampled every second, because
 * a restart forgets the history.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import type { OutageWindow } from "./poller";

/** What Redis records (`latency-monitor-threshold`): anything shorter cannot hold a 2 s answer. */
export const REDIS_LATENCY_THRESHOLD_MS = 500;

export interface RedisStall {
  /** Redis's name for what stalled: `aof-write-pending-fsync`, `command`, `fork`… */
  event: string;
  /** When it ended (epoch ms, to the second Redis records). */
  at: number;
  ms: number;
}

export class RedisStalls {
  readonly stalls: RedisStall[] = [];
  private readonly seen = new Set<string>();
  private running = false;
  private loop: Promise<void> = Promise.resolve();
  private readonly client: Redis;

  constructor(port: number) {
    this.client = new Redis({
      host: "127.0.0.1",
      port,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 1_000,
      commandTimeout: 1_000,
    });
    this.client.on("error", () => undefined); // Redis is restarted during the run: a miss is a skipped sample.
  }

  start(): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        await this.sample().catch(() => undefined);
        await sleep(1_000);
      }
    })();
  }

  /** Takes a last sample and disconnects; a second call does nothing. */
  async stop(): Promise<void> {
    if (this.client.status === "end") return;
    this.running = false;
    await this.loop;
    await this.sample().catch(() => undefined);
    this.client.disconnect();
  }

  /** Each stall as an outage window: from its start to the end of the second Redis stamped it with. */
  windows(): OutageWindow[] {
    return this.stalls.map((s) => ({
      what: `Redis stalled (${s.event}, ${s.ms} ms)`,
      from: s.at - s.ms,
      to: s.at + 1_000,
    }));
  }

  private async sample(): Promise<void> {
    if (this.client.status === "wait") await this.client.connect();
    const latest = (await this.client.call("LATENCY", "LATEST")) as [string, number, number, number][];
    for (const [event] of latest) {
      const history = (await this.client.call("LATENCY", "HISTORY", event)) as [number, number][];
      for (const [seconds, ms] of history) {
        const id = `${event}@${seconds}`;
        if (this.seen.has(id)) continue;
        this.seen.add(id);
        this.stalls.push({ event, at: seconds * 1000, ms });
      }
    }
  }
}
