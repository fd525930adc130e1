/**
 * A PostgreSQL cluster of a chaos run's own (`initdb` into a temporary directory, its own port
 * and socket directory), so the run can stop and start it without disturbing anything else on
 * the machine. As root, the server runs as the `postgres` user, which owns the directory.
 */
import { execFileSync } from "node:child_process";
import { chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const BIN = process.env.BOUNDED_PG_BIN ?? "/usr/lib/postgresql/15/bin";

/** Clusters not destroyed yet: a run stopped mid-way (Ctrl-C, a kill) still stops them and removes their directories. */
const live = new Set<PrivatePostgres>();
process.once("exit", () => {
  for (const pg of live) pg.destroy();
});

export class PrivatePostgres {
  private readonly dir: string;
  private readonly asPostgres: boolean;
  private readonly uid: number | null = null;
  private readonly gid: number | null = null;

  constructor(readonly port: number) {
    this.dir = mkdtempSync(join(tmpdir(), "bounded-chaos-pg-"));
    this.asPostgres = process.getuid?.() === 0;
    if (this.asPostgres) {
      this.uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
      this.gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
      chownSync(this.dir, this.uid, this.gid);
    }
    live.add(this);
  }

  /** The URL of `database` on this cluster. */
  url(database: string): string {
    return `postgresql://postgres@127.0.0.1:${this.port}/${database}`;
  }

  private run(tool: string, args: string[]): void {
    const cmd = join(BIN, tool);
    if (this.asPostgres)
      execFileSync("runuser", ["-u", "postgres", "--", cmd, ...args], { stdio: "pipe", cwd: this.dir });
    else execFileSync(cmd, args, { stdio: "pipe", cwd: this.dir });
  }

  private get data(): string {
    return join(this.dir, "data");
  }

  /** initdb (trust, user postgres) and start; resolves when the server accepts connections. */
  init(): void {
    this.run("initdb", ["-D", this.data, "-A", "trust", "-U", "postgres", "--no-sync"]);
    this.start();
  }

  start(): void {
    // Durability is not what a chaos run tests: fsync off keeps the commits of a busy 2-core machine fast.
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c synchronous_commit=off`;
    this.run("pg_ctl", ["-D", this.data, "-o", options, "-l", join(this.dir, "server.log"), "-w", "-t", "60", "start"]);
  }

  /** A normal stop (`-m fast`): open sessions are terminated, as when an operator stops the server. */
  stop(): void {
    this.run("pg_ctl", ["-D", this.data, "-m", "fast", "-w", "-t", "60", "stop"]);
  }

  /** Stops the server if it runs and removes its directory. */
  destroy(): void {
    live.delete(this);
    try {
      this.run("pg_ctl", ["-D", this.data, "-m", "immediate", "-w", "-t", "30", "stop"]);
    } catch {
      /* not running */
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
