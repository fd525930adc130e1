-- A job's batch at the provider's Batch API is recorded as one call of its own type
-- (lib/runs/batch-lane.ts), so hours of turnaround never enter a direct call's latency.
ALTER TYPE "CallType" ADD VALUE 'batch';
