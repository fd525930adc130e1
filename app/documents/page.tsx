import type { Metadata } from "next";
import { SUPPORTED_TYPES_LABEL } from "@/lib/documents/inspect-documents";
import { formatBytes } from "@/lib/units";
import { documentLimits } from "@/lib/documents/settings";
import { DocumentsForm } from "./documents-form";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Read documents" };

export default function DocumentsPage() {
  const limits = documentLimits();
  return (
    <main className="narrow">
      <h1>Read documents</h1>
      <p className="muted">
        Upload scans, photos or text files. Each document is read (OCR) and summarised in one sentence; you can watch
        the batch on the next page and keep its link to come back later.
      </p>
      <div className="panel">
        <DocumentsForm
          maxFiles={limits.maxFiles}
          maxFileLabel={formatBytes(limits.maxFileBytes)}
          maxTotalLabel={formatBytes(limits.maxTotalBytes)}
          typesLabel={SUPPORTED_TYPES_LABEL}
        />
      </div>
    </main>
  );
}
