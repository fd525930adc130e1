-- Hand-written (the schema engine cannot run here), like 20261203121500_job_search_by_filename.
--
-- The job search also finds a job by what it processed: part of an imported row's counterparty or
-- description (a supplier, an invoice number in the text), or of an item's failure reason. Trigram
-- GIN indexes answer a case-insensitive substring of three characters or more from the index, so
-- the search costs the rows it matches, not a year of history. One expression index for a row's
-- two text fields: one index to keep up per imported row, not two.
CREATE INDEX "Transaction_text_trgm_idx" ON "Transaction" USING gin ((counterparty || ' ' || description) gin_trgm_ops);

CREATE INDEX "JobItemFailure_reason_trgm_idx" ON "JobItemFailure" USING gin (reason gin_trgm_ops);
