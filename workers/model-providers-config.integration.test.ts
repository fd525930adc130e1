import { describe, expect, it } from "vitest";
import { startWorkers } from "@/test/helpers/start-workers";

describe("workers refuse to start with the model providers configured wrong", () => {
  it("exits 1 with one line per mistake, naming each variable, before starting anything", async () => {
    const { code, output } = await startWorkers({
      BOUNDED_MODEL_PROVIDERS: "backup",
      MODEL_BACKUP_BASE_URL: "backup.example/v1",
      BOUNDED_MODEL_ROUTE_AGENT_RUN: "primary,spare",
    });
    expect(code).toBe(1);
    const fatal = output
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as { level: string; err?: { message: string } })
      .find((line) => line.level === "fatal");
    expect(fatal?.err?.message.split("\n")).toEqual([
      "the model providers are not configured right:",
      '  - MODEL_BACKUP_BASE_URL: must be a URL, as https://api.openai.com/v1 (got "backup.example/v1")',
      '  - MODEL_BACKUP_NAME: required for the model provider "backup" named in BOUNDED_MODEL_PROVIDERS (the model to ask for)',
      '  - BOUNDED_MODEL_ROUTE_AGENT_RUN: "spare" is not a model provider (there are: primary)',
      "Fix them in the environment or .env, see .env.example.",
    ]);
    // Before anything started: the budgets are published right after the checks.
    expect(output).not.toContain("publishing worker budgets");
    expect(output).not.toContain("workers started");
  }, 40_000);
});
