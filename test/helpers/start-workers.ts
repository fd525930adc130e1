import { spawn } from "node:child_process";

const root = `${import.meta.dirname}/../..`;

/** Starts a worker process and collects what it says until it exits. */
export function startWorkers(extraEnv: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "workers/main.ts"], {
      cwd: root,
      env: { ...process.env, LOG_LEVEL: "info", ...extraEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}
