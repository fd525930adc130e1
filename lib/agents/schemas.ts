import { z } from "zod";
import { tenantSlugSchema } from "@/lib/tenants/slug";

/** The most steps one agent run may take: a runaway plan is refused, not budgeted for. */
const MAX_AGENT_STEPS = 50;

/** What an `agent_run` job is asked to do (its `params`). */
export const agentRunParamsSchema = z.object({
  task: z
    .string({ error: "task is required" })
    .trim()
    .min(1, "task is empty")
    .max(2_000, "task is longer than 2,000 characters"),
  steps: z
    .number({ error: "steps must be a whole number from 1 to 50" })
    .int("steps must be a whole number from 1 to 50")
    .min(1, "steps must be at least 1")
    .max(MAX_AGENT_STEPS, `steps must be at most ${MAX_AGENT_STEPS}`),
  /** A person is waiting: the run goes to the `agent-interactive` queue and its tight budget. */
  interactive: z.boolean({ error: "interactive must be true or false" }).optional().default(false),
});
export type AgentRunParams = z.infer<typeof agentRunParamsSchema>;

/** The body of `POST /api/agent-runs`. */
export const agentRunRequestSchema = agentRunParamsSchema.extend({ tenant: tenantSlugSchema }).strict();

/** One tool invocation of a step, as kept in the job's result. */
export interface ToolUse {
  tool: string;
  input: Record<string, string | number>;
  output: Record<string, string | number>;
}

/** One finished step: what the model said it would do, and what the tools returned. */
export interface AgentStep {
  step: number;
  note: string;
  tools: ToolUse[];
}

export const agentStepSchema: z.ZodType<AgentStep> = z.object({
  step: z.number().int(),
  note: z.string(),
  tools: z.array(
    z.object({
      tool: z.string(),
      input: z.record(z.string(), z.union([z.string(), z.number()])),
      output: z.record(z.string(), z.union([z.string(), z.number()])),
    }),
  ),
});
