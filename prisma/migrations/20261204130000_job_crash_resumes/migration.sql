-- How many times a job was resumed after its run stopped without settling (its worker died or
-- lost the job); bounded, then the job ends with a message a person understands.
ALTER TABLE "Job" ADD COLUMN "crashResumes" INTEGER NOT NULL DEFAULT 0;
