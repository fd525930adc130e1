import { createRequire } from "node:module";
import type { Page } from "@playwright/test";

/**
 * axe-core's accessibility rules run in the page as it is now (the engine injected from the
 * npm package, no network): the violations, each with its rule, impact and the first offending
 * element, so a failing test says what to fix.
 */
export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  target: string;
}

const AXE_SOURCE = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.addScriptTag({ path: AXE_SOURCE });
  return page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run(
            context: Document,
            options: object,
          ): Promise<{
            violations: { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[];
          }>;
        };
      }
    ).axe;
    const { violations } = await axe.run(document, { resultTypes: ["violations"] });
    return violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      target: String(v.nodes[0]?.target[0] ?? ""),
    }));
  });
}
