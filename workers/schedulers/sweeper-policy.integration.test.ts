import { describe, expect, it } from "vitest";
import { startWorkers } from "@/test/helpers/start-workers";

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
