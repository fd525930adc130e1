/**
 * The timeline events that open and close an operator's cancel request: a `cancel_requested` event
 * is open until a `retry` comes after it. Written by lib/actions/cancel.ts and the retry actions;
 * read by a run at its start and its heartbeats (lib/runs/cancel-request.ts, lib/runs/attempt.ts).
 */
export const REQUEST_EVENT = "cancel_requested";
/** An operator's retry: it closes any request before it. */
export const RETRY_EVENT = "retry";
