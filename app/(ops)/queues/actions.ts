"use server";

import { z } from "zod";
import { operatorAction, type ActionState as OperatorActionState } from "@/lib/http/operator";
import { describePause, pauseQueue, queueNameInput, resumeQueue } from "@/lib/queues/pause";

export type ActionState = OperatorActionState;

const fields = (form: FormData) => ({ queue: form.get("queue") });
const schema = z.object({ queue: queueNameInput.pipe(z.string().min(1, "Choose a queue")) });
const target = (raw: { queue: FormDataEntryValue | null }) =>
  typeof raw.queue === "string" ? raw.queue.slice(0, 100) : null;

const pause = operatorAction({
  action: "queue.pause",
  fields,
  schema,
  target,
  run: (input, principal) => pauseQueue(input.queue, principal),
  describe: describePause,
  revalidate: () => "/queues",
});

const resume = operatorAction({
  action: "queue.resume",
  fields,
  schema,
  target,
  run: (input) => resumeQueue(input.queue),
  describe: describePause,
  revalidate: () => "/queues",
});

/** The Queues page's Pause: the same lib function as POST /api/queues/:queue/pause, with the same audit entry. */
export async function pauseQueueAction(prev: ActionState, form: FormData): Promise<ActionState> {
  return pause(prev, form);
}

/** The Queues page's Resume: the same lib function as POST /api/queues/:queue/resume, with the same audit entry. */
export async function resumeQueueAction(prev: ActionState, form: FormData): Promise<ActionState> {
  return resume(prev, form);
}
