import { db } from "@/lib/db/client";

/**
 * An upload as its readers take it (lib/imports/csv-rows.ts): its delimiter and its bytes, a slice
 * at a time, so a reader holds a slice of the file, never the file — however long it is.
 */
export interface StoredUpload {
  delimiter: string;
  /** The file's bytes in order, read anew at each call. */
  bytes(): AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
}

/** Bytes read from PostgreSQL at a time, unless the file is so long that this would take more than `MAX_READS`. */
const READ_BYTES = 256 * 1024;
/**
 * Reads of one file at most. A stored file is compressed, and PostgreSQL decompresses from its
 * start up to the end of each slice asked for, so the work of reading a file grows with the
 * number of reads × its length: past 64 × 256 kB (16 MB), the slices grow with the file instead.
 */
const MAX_READS = 64;

/**
 * The file stored for `jobId`'s import, read from PostgreSQL a slice at a time as the reader comes
 * to it; null when there is none. A file removed while it is read (its job deleted) ends the read
 * with an error rather than a file cut short.
 */
export async function storedUpload(jobId: string): Promise<StoredUpload | null> {
  const [found] = await db().$queryRaw<{ delimiter: string; size: number }[]>`
    SELECT delimiter, octet_length(content)::int AS size FROM "Upload" WHERE "jobId" = ${jobId}::uuid`;
  if (!found) return null;
  const { delimiter, size } = found;
  const slice = Math.max(READ_BYTES, Math.ceil(size / MAX_READS));
  return {
    delimiter,
    async *bytes() {
      for (let at = 0; at < size; at += slice) {
        const [part] = await db().$queryRaw<{ part: Uint8Array }[]>`
          SELECT substring(content FROM ${at + 1}::int FOR ${slice}::int) AS part FROM "Upload" WHERE "jobId" = ${jobId}::uuid`;
        if (!part) throw new Error(`the file stored for import ${jobId} was removed while it was read`);
        yield part.part;
      }
    },
  };
}
