-- Not generated (see 20261202164600_job_list_and_reaped_indexes): hand-written because the
-- schema engine cannot run here.
--
-- The job search matches an uploaded file's name as a case-insensitive substring (ILIKE
-- '%…%'). A B-tree cannot serve a pattern with a leading wildcard, so without these every search
-- reads every upload; a trigram GIN index answers any pattern of three characters or more from
-- the index. pg_trgm ships with PostgreSQL (contrib) and is a trusted extension, so the database
-- owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- A CSV import's file.
CREATE INDEX "Upload_filename_trgm_idx" ON "Upload" USING gin ("filename" gin_trgm_ops);

-- Each document of an OCR batch.
CREATE INDEX "JobFile_filename_trgm_idx" ON "JobFile" USING gin ("filename" gin_trgm_ops);
