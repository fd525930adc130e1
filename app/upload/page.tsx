import type { Metadata } from "next";
import { uploadLimits } from "@/lib/imports/create-import";
import { formatBytes } from "@/lib/units";
import { UploadForm } from "./upload-form";
import { formatCount } from "@/lib/format/number";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Import transactions" };

export default function UploadPage() {
  const limits = uploadLimits();
  return (
    <main className="narrow">
      <h1>Import bank transactions</h1>
      <p className="muted">
        Upload a CSV export from your bank. Each transaction is checked and categorised; you can watch the import on the
        next page and keep its link to come back later.
      </p>
      <div className="panel">
        <UploadForm maxBytesLabel={formatBytes(limits.maxBytes)} maxRows={formatCount(limits.maxRows)} />
      </div>
    </main>
  );
}
