import { formatCount } from "@/lib/format/number";
import { z } from "zod";
import { buildStepPrompt, cleanNote, composeAnswer, planStep } from "@/lib/agents/plan";
import { agentRunParamsSchema, agentStepSchema, type AgentStep, type ToolUse } from "@/lib/agents/schemas";
import { callTool, ToolError } from "@/lib/agents/tools";
import { db, type Prisma } from "@/lib/db/client";
import { ItemError, JobFailed } from "@/lib/core/signals";
import { forEachItem } from "@/lib/runs/for-each-item";
import { countLabel, SEE_THE_LIST } from "@/lib/jobs/messages";
import { chatCompletion } from "@/lib/modelcalls/chat-completion";
import { ModelCallError } from "@/lib/modelcalls/errors";
import type { Processor } from "@/lib/runs/processor";

const storedStepsSchema = z.object({ steps: z.array(agentStepSchema) }).partial();

/** The steps finished so far, as committed on the job's `result` (earlier attempts included). */
async function committedSteps(jobId: string): Promise<AgentStep[]> {
  const row = await db().job.findUnique({ where: { id: jobId }, select: { result: true } });
  const parsed = storedStepsSchema.safeParse(row?.result ?? {});
  return parsed.success ? (parsed.data.steps ?? []) : [];
}

/**
 * Appends a finished step to `result.steps`, in the item's transaction: a step's record and the
 * job's advance commit together, so a resumed run neither loses nor repeats a step.
 */
async function appendStep(tx: Prisma.TransactionClient, jobId: string, step: AgentStep): Promise<void> {
  await tx.$executeRaw`
    UPDATE "Job"
    SET result = jsonb_set(
      CASE WHEN jsonb_typeof(result) = 'object' THEN result ELSE '{}'::jsonb END,
      '{steps}',
      CASE WHEN jsonb_typeof(result->'steps') = 'array' THEN result->'steps' ELSE '[]'::jsonb END || ${JSON.stringify([step])}::jsonb
    )
    WHERE id = ${jobId}::uuid`;
}

/**
 * `agent_run`: `steps` items; each is one model call (what to do next) followed by 1–3
 * deterministic tool calls (rate lookup, conversion, formatting), every call recorded with its
 * type. A step that fails (the model does not answer, a tool refuses its input) is that step's
 * failure; the run goes on. The final answer, composed from the finished steps, is the job's
 * `result.answer`; `result.steps` keeps each step's note and tool outputs, also when the run
 * times out part-way.
 */
export const agentRun: Processor = async ({ run, loop }) => {
  const parsed = agentRunParamsSchema.safeParse(run.params);
  if (!parsed.success)
    throw new JobFailed(
      `The agent run cannot start: ${parsed.error.issues[0]?.message ?? "its parameters are invalid"}.`,
    );
  const { task, steps } = parsed.data;
  const context = { queue: run.queue, jobKind: run.kind, jobId: run.jobId };
  const trail = await committedSteps(run.jobId);

  await forEachItem(
    loop,
    Array.from({ length: steps }, (_, i) => i + 1),
    async (step, { signal }) => {
      const plan = planStep(task, step);
      let note: string;
      try {
        const { content } = await chatCompletion({
          messages: buildStepPrompt(task, plan, steps, trail),
          temperature: 0,
          signal,
          context,
        });
        note = cleanNote(content);
      } catch (err) {
        // Refused for good (its length, its content): the step's own; anything else is not (lib/runs/item-fault.ts).
        if (err instanceof ModelCallError && !err.retryable)
          throw new ItemError(`step ${step}: the model service refused it (HTTP ${err.status ?? "error"})`);
        throw err;
      }

      const tools: ToolUse[] = [];
      try {
        const rate = await callTool("lookup_rate", { currency: plan.currency }, { signal, context });
        tools.push(rate);
        if (plan.tools.includes("convert_amount")) {
          const converted = await callTool(
            "convert_amount",
            { amount: plan.amount, perEur: rate.output.perEur! },
            { signal, context },
          );
          tools.push(converted);
          if (plan.tools.includes("format_line")) {
            tools.push(
              await callTool(
                "format_line",
                { amount: plan.amount, currency: plan.currency, eur: converted.output.eur! },
                { signal, context },
              ),
            );
          }
        }
      } catch (err) {
        if (err instanceof ToolError)
          throw new ItemError(`step ${step}: tool ${plan.tools[tools.length]} failed: ${err.message}`);
        throw err;
      }

      const record: AgentStep = { step, note, tools };
      return async (tx) => {
        await appendStep(tx, run.jobId, record);
        trail.push(record);
      };
    },
  );

  const done = await committedSteps(run.jobId);
  const answer = composeAnswer(task, done, steps);
  return {
    result: { task, answer, steps: done } as unknown as Prisma.InputJsonValue,
    message: (row) =>
      row.failed > 0
        ? `Finished ${formatCount(row.processed)} of ${countLabel(row.processed + row.failed, "step")}; ${countLabel(row.failed, "step")} failed${SEE_THE_LIST}.`
        : `Finished all ${countLabel(row.processed, "step")}.`,
  };
};
