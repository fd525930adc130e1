import Link from "next/link";
import type { ReactNode } from "react";

/**
 * A list page's filters: a GET form (the filter lives in the address, so it can be shared and
 * reloaded), its submit button, and a link back to the unfiltered page.
 */
export function FilterForm({
  clearHref,
  submitLabel = "Filter",
  label,
  children,
}: {
  clearHref: string;
  submitLabel?: string;
  label?: string;
  children: ReactNode;
}) {
  return (
    <search aria-label={label}>
      <form className="filters" method="get">
        {children}
        <button type="submit">{submitLabel}</button>
        <Link href={clearHref} className="button secondary">
          Clear
        </Link>
      </form>
    </search>
  );
}
