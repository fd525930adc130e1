import { describe, expect, it } from "vitest";
import { buildStepPrompt, cleanNote, composeAnswer, planStep } from "./plan";
import type { AgentStep } from "./schemas";

describe("planStep: the plan follows from the task alone", () => {
  it("takes the task's currencies and amounts in turn and chains 1, 2, 3 tools", () => {
    const task = "Convert 120 USD and 80.50 GBP to EUR";
    expect(planStep(task, 1)).toEqual({ step: 1, currency: "USD", amount: 120, tools: ["lookup_rate"] });
    expect(planStep(task, 2)).toEqual({
      step: 2,
      currency: "GBP",
      amount: 80.5,
      tools: ["lookup_rate", "convert_amount"],
    });
    expect(planStep(task, 3)).toEqual({
      step: 3,
      currency: "USD",
      amount: 120,
      tools: ["lookup_rate", "convert_amount", "format_line"],
    });
    expect(planStep(task, 4).tools).toEqual(["lookup_rate"]);
  });

  it("falls back to a default basket when the task names no currency or amount", () => {
    expect(planStep("check the usual rates", 2)).toEqual({
      step: 2,
      currency: "GBP",
      amount: 100,
      tools: ["lookup_rate", "convert_amount"],
    });
  });
});

describe("the prompt and the answer", () => {
  const steps: AgentStep[] = [
    {
      step: 2,
      note: "convert",
      tools: [
        { tool: "lookup_rate", input: { currency: "GBP" }, output: { currency: "GBP", perEur: 0.86 } },
        { tool: "convert_amount", input: { amount: 86, perEur: 0.86 }, output: { eur: 100 } },
      ],
    },
    {
      step: 1,
      note: "look up",
      tools: [{ tool: "lookup_rate", input: { currency: "USD" }, output: { currency: "USD", perEur: 1.08 } }],
    },
    {
      step: 3,
      note: "format",
      tools: [
        { tool: "lookup_rate", input: { currency: "USD" }, output: { currency: "USD", perEur: 1.08 } },
        { tool: "convert_amount", input: { amount: 108, perEur: 1.08 }, output: { eur: 100 } },
        {
          tool: "format_line",
          input: { amount: 108, currency: "USD", eur: 100 },
          output: { line: "108.00 USD ≈ 100.00 EUR" },
        },
      ],
    },
  ];

  it("shows the model the task, the step's plan and the latest observations", () => {
    const [system, user] = buildStepPrompt("Convert 108 USD", planStep("Convert 108 USD", 4), 5, steps);
    expect(system!.role).toBe("system");
    expect(user!.content).toContain("Task: Convert 108 USD\nStep 4 of 5: 108 USD, tools lookup_rate.");
    expect(user!.content).toContain('- step 3: lookup_rate → {"currency":"USD","perEur":1.08}');
  });

  it("composes the final answer from the finished steps, saying how many failed", () => {
    expect(composeAnswer("Convert 108 USD", steps, 4)).toBe(
      "3 of 4 steps done (1 failed) for “Convert 108 USD”. Rates per EUR: USD 1.08, GBP 0.86. 2 conversions totalling 200.00 EUR. 108.00 USD ≈ 100.00 EUR.",
    );
    expect(composeAnswer("x", [], 2)).toBe(
      "0 of 2 steps done (2 failed) for “x”. No step finished, so there is no answer.",
    );
  });

  it("keeps a model's note to one short line", () => {
    expect(cleanNote("<think>hmm</think>\n  Look up\n the rate. ")).toBe("Look up the rate.");
    expect(cleanNote("a".repeat(400))).toHaveLength(300);
  });
});
