/**
 * A run tried to write for an attempt that is no longer the job's current one (a newer attempt
 * started, or the job was finalized). The write was refused; the run must stop.
 */
export class AttemptFenced extends Error {
  override name = "AttemptFenced";
  constructor(readonly jobId: string, readonly attempt: number) {
    super(`job ${jobId}: attempt ${attempt} is no longer current; write refused`);
  }
}
