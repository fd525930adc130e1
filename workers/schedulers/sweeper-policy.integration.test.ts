import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";

const root = `${import.meta.dirname}/../..`;

/** Starts a worker process and collects what it says until it exits. */
function startWorkers(extraEnv: Record<string, string>): Promise<{ code: number | null; output: string }> {
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

describe("workers refuse to start with a sweep window shorter than the worst case × margin", () => {
  it("exits 1 naming the window and the worst case, before starting anything", async () => {
    const { code, output } = await startWorkers({ BOUNDED_RESERVE_SWEEP_WINDOW_S: "900" });
    expect(code).toBe(1);
    expect(output).toContain(
      "the reserve sweep window 900 s (BOUNDED_RESERVE_SWEEP_WINDOW_S=900) is shorter than the worst case of a generation 960 s × margin 1.5 = 1440 s",
    );
    expect(output).not.toContain("workers started");
  }, 40_000);
});
