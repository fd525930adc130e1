-- Tokens of a model call as the endpoint counted them (its answer's `usage`). Null for calls that
-- got no answer, for tool and OCR calls, and for calls recorded before this column existed.
ALTER TABLE "ModelCall" ADD COLUMN "promptTokens" INTEGER,
ADD COLUMN "completionTokens" INTEGER;
