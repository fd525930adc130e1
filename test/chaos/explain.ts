/**
 * What a chaos run prints for every row that did not end as its file said it would: the job, the
 * row, what was recorded (its reason, the attempt, the time) and, beside it, the faults the run
 * caused around that time — so the next unexpected failure names its cause at once.
 */

/** A fault the run caused: a moment (a SIGKILL) or a window (a dependency down). Epoch ms. */
export interface Fault {
  what: string;
  from: number;
  to: number;
}

/** A row that did not end as its file said: recorded failed though it was good, or never written. */
export type RowFinding =
  | {
      type: "failed";
      jobId: string;
      row: number;
      reason: string;
      attempt: number;
      at: Date;
    }
  | {
      type: "missing";
      jobId: string;
      row: number;
      /** The job as it ended: its status, its last attempt, and its life (first and last write). */
      status: string;
      attempt: number;
      createdAt: Date;
      updatedAt: Date;
    };

/** How far from a moment a fault is still printed beside it. */
const NEAR_MS = 15_000;

/** Seconds from `a` to `b`, signed, as "+1.2 s" / "−3.4 s". */
function offset(ms: number): string {
  return `${ms < 0 ? "−" : "+"}${(Math.abs(ms) / 1000).toFixed(1)} s`;
}

/** The faults within `NEAR_MS` of [from, to], each said relative to `origin`; or that there were none. */
export function faultsNear(faults: readonly Fault[], from: number, to: number, origin = from): string {
  const near = faults
    .filter((f) => f.to >= from - NEAR_MS && f.from <= to + NEAR_MS)
    .sort((a, b) => a.from - b.from)
    .map((f) =>
      f.to > f.from
        ? `${f.what} from ${offset(f.from - origin)} to ${offset(f.to - origin)}`
        : `${f.what} at ${offset(f.from - origin)}`,
    );
  return near.length ? near.join("; ") : `no fault within ${NEAR_MS / 1000} s`;
}

/** One line per finding: what was recorded, when (from the run's start), and the faults around it. */
export function explainFindings(
  findings: readonly RowFinding[],
  faults: readonly Fault[],
  startedAt: number,
): string[] {
  return findings.map((f) => {
    if (f.type === "failed") {
      const at = f.at.getTime();
      return `job ${f.jobId} row ${f.row}: recorded failed by attempt ${f.attempt} at ${offset(at - startedAt)} from the start, "${f.reason}" — faults around it (from that moment): ${faultsNear(faults, at, at)}`;
    }
    const from = f.createdAt.getTime();
    const to = f.updatedAt.getTime();
    return `job ${f.jobId} row ${f.row}: never written; the job ended ${f.status} after attempt ${f.attempt}, alive from ${offset(from - startedAt)} to ${offset(to - startedAt)} from the start — faults in its life (from the start): ${faultsNear(faults, from, to, startedAt)}`;
  });
}
