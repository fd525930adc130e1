"use client";

import { useRouter } from "next/navigation";
import { useActionState, useEffect, useState } from "react";
import type { JobStatus } from "@/lib/core/job-statuses";
import { ActionResult } from "../../../components/action-result";
import { cancelJobAction, type ActionState } from "./actions";
import { formatCount } from "@/lib/format/number";

const OPEN: readonly JobStatus[] = ["queued", "running", "delayed"];
const confirmStyle = { background: "var(--bad)", borderColor: "var(--bad)", color: "#fff" };

/**
 * The job page's Cancel, for a job that has not ended (nothing is shown once it has): a first click
 * asks to confirm, saying what happens to the work done; the second cancels. A running job stops
 * within a second or two, so the page is drawn again shortly after.
 */
export function CancelForm(props: {
  jobId: string;
  status: JobStatus;
  canAct: boolean;
  noun: string;
  done: number;
  parts: number;
}) {
  const [state, action, pending] = useActionState<ActionState, FormData>(cancelJobAction, {});
  const [confirming, setConfirming] = useState(false);
  const router = useRouter();
  useEffect(() => {
    if (!state.ok) return;
    setConfirming(false);
    // The worker finalizes a running job after its next poll: show the row as it ends.
    const timers = [1_500, 4_000].map((ms) => setTimeout(() => router.refresh(), ms));
    return () => timers.forEach(clearTimeout);
  }, [state, router]);

  if (!OPEN.includes(props.status) && !state.ok) return null;
  const { noun } = props;
  const what =
    props.parts > 0
      ? `Cancels the job and its open parts; no further part is made. The ${noun}s done are kept, and retrying a part continues from there.`
      : props.status === "running"
        ? `Stops the run before its next ${noun}: ${noun}s in flight end, the ${formatCount(props.done)} done are kept, and a retry continues from there.`
        : props.status === "delayed"
          ? "Takes the job out of its queue before it resumes from its wait (the message above says what it waits for); any batch of its rows at the provider's batch service is cancelled too. A retry runs it later."
          : "Takes the job out of its queue before it starts; a retry runs it later.";
  const disabledReason = props.canAct ? null : "Only operators can cancel jobs; you are signed in as a viewer.";
  return (
    <section className="panel" aria-labelledby="cancel-heading">
      <h2 id="cancel-heading">Cancel</h2>
      <p className="muted small">{what} The customer’s progress page shows it as cancelled.</p>
      <form action={action} className="form-stack" style={{ gap: "0.6rem" }} aria-label="Cancel job">
        <input type="hidden" name="jobId" value={props.jobId} />
        {confirming ? (
          <>
            <p className="message warn" style={{ marginTop: 0 }}>
              Cancel this job? {props.status === "running" ? `It stops before its next ${noun}.` : "It will not run."}
            </p>
            <label className="field">
              Reason (optional, kept in the job’s timeline)
              <input type="text" name="reason" maxLength={500} placeholder="e.g. wrong file uploaded" />
            </label>
            <div style={{ display: "flex", gap: "0.6rem", flexWrap: "wrap" }}>
              <button type="submit" style={confirmStyle} disabled={pending}>
                {pending ? "Cancelling…" : "Yes, cancel the job"}
              </button>
              <button type="button" className="secondary" onClick={() => setConfirming(false)} disabled={pending}>
                Keep it
              </button>
            </div>
          </>
        ) : (
          <div>
            <button
              type="button"
              className="secondary"
              disabled={!props.canAct || state.ok === true}
              title={disabledReason ?? undefined}
              onClick={() => setConfirming(true)}
            >
              Cancel job
            </button>
          </div>
        )}
        <ActionResult disabledReason={disabledReason} state={state} />
      </form>
    </section>
  );
}
