/**
 * What a person or a load balancer sees of the web during a chaos run: a few API routes and
 * pages polled side by side all along, each answer kept with when it started and ended. The
 * chaos opens a window around each outage it causes (PostgreSQL stopped, Redis restarting, the
 * web process restarting); afterwards every answer is classified: a 5xx inside a window is the
 * expected answer (a fast 503), a 5xx outside one is a bug.
 */
import { setTimeout as sleep } from "node:timers/promises";

export interface OutageWindow {
  what: string;
  from: number;
  to: number | null;
}

interface Answer {
  path: string;
  from: number;
  to: number;
  /** 0: no answer (connection refused or reset, or no answer within the poll's time limit). */
  status: number;
}

export interface PollSummary {
  answers: number;
  /** 5xx answered outside every window (plus its tolerance): the goal is none. */
  errorsOutside: { path: string; status: number; at: string }[];
  /** 5xx answered inside a window: the fast "not available" the outage should produce. */
  errorsInside: number;
  /** Requests that got no answer, inside and outside the windows (the web process was down). */
  noAnswerInside: number;
  noAnswerOutside: number;
  /** The slowest 5xx inside a window, in ms: "answers 503 fast". */
  slowestErrorInsideMs: number;
}

/** How long a poll waits for an answer: longer than any time limit of the web's own. */
const POLL_TIMEOUT_MS = 15_000;

export class WebPoller {
  private readonly answers: Answer[] = [];
  readonly windows: OutageWindow[] = [];
  private running = false;
  private loop: Promise<void> = Promise.resolve();

  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
    /** The paths to poll right now (a progress page joins once a job exists). */
    private readonly paths: () => string[],
    private readonly everyMs = 500,
  ) {}

  /** Opens a window now; close it with `close`. */
  open(what: string): OutageWindow {
    const w = { what, from: Date.now(), to: null };
    this.windows.push(w);
    return w;
  }

  close(w: OutageWindow): void {
    w.to = Date.now();
  }

  start(): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        await Promise.all(this.paths().map((p) => this.poll(p)));
        await sleep(this.everyMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  private async poll(path: string): Promise<void> {
    const from = Date.now();
    let status = 0;
    try {
      const res = await fetch(`${this.baseUrl}${path}`, {
        headers: { authorization: `Bearer ${this.token}` },
        signal: AbortSignal.timeout(POLL_TIMEOUT_MS),
        redirect: "manual",
      });
      status = res.status;
      await res.body?.cancel();
    } catch {
      status = 0;
    }
    this.answers.push({ path, from, to: Date.now(), status });
  }

  /**
   * Classifies every answer: inside a window when the request overlapped it, the window extended
   * by `toleranceMs` after it closed (clients reconnect after a dependency is back).
   */
  summary(toleranceMs: number): PollSummary {
    const inside = (a: Answer) =>
      this.windows.some((w) => a.to >= w.from && a.from <= (w.to ?? Date.now()) + toleranceMs);
    const s: PollSummary = {
      answers: this.answers.length,
      errorsOutside: [],
      errorsInside: 0,
      noAnswerInside: 0,
      noAnswerOutside: 0,
      slowestErrorInsideMs: 0,
    };
    for (const a of this.answers) {
      const isIn = inside(a);
      if (a.status === 0) {
        if (isIn) s.noAnswerInside++;
        else s.noAnswerOutside++;
      } else if (a.status >= 500) {
        if (isIn) {
          s.errorsInside++;
          s.slowestErrorInsideMs = Math.max(s.slowestErrorInsideMs, a.to - a.from);
        } else s.errorsOutside.push({ path: a.path, status: a.status, at: new Date(a.from).toISOString() });
      }
    }
    return s;
  }
}
