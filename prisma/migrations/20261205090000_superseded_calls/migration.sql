-- A hedged request that lost to its twin is cancelled because the same request was answered
-- (lib/modelcalls/chat-completion.ts): recorded as superseded, apart from the calls aborted by
-- their job's deadline or cancel, so a normal hedge is never counted as a failure.
ALTER TYPE "ModelCallOutcome" ADD VALUE 'superseded';
