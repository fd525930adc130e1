import type { CSSProperties, ReactNode } from "react";
import { formatCount } from "@/lib/format/number";

/** A column heading; a `num` one is right-aligned like the numbers under it. */
export type Heading = string | { label: string; className: string };

/** A heading for a column of numbers. */
export const num = (label: string): Heading => ({ label, className: "num" });

/**
 * The bordered, scrollable `table.data` every list page uses. The caller writes the rows (cells
 * differ too much from table to table to describe as data); the frame, the headings and the
 * empty state are the same everywhere.
 */
export function DataTable<T>({
  headings,
  rows,
  children,
  empty,
  footer,
  after,
  className,
  testId,
  label,
  columnWidths,
  style,
}: {
  headings: readonly Heading[];
  rows: readonly T[];
  /** One `<tr>` (with its key) per row. */
  children: (row: T, index: number) => ReactNode;
  /** Shown instead of the table when there are no rows; without it an empty table is drawn. */
  empty?: ReactNode;
  /** Rows after the data rows, such as totals. */
  footer?: ReactNode;
  /** Inside the frame, under the table (a note about what is not shown). */
  after?: ReactNode;
  /** Added to `data`. */
  className?: string;
  testId?: string;
  /** The table's accessible name. */
  label?: string;
  /** Fixed column widths (in %); on a phone such a table keeps a minimum width and scrolls in its frame. */
  columnWidths?: readonly string[];
  style?: CSSProperties;
}) {
  if (rows.length === 0 && empty !== undefined) return <div className="empty">{empty}</div>;
  return (
    // Focusable: on a narrow screen the frame scrolls, and a keyboard must be able to scroll it too.
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region is reached by keyboard only this way (WCAG 2.1.1).
    <div className="table-wrap" tabIndex={0}>
      <table
        className={["data", columnWidths ? "fixed-cols" : null, className].filter(Boolean).join(" ")}
        data-testid={testId}
        aria-label={label}
        style={style}
      >
        {columnWidths ? (
          <colgroup>
            {columnWidths.map((width, i) => (
              // biome-ignore lint/suspicious/noArrayIndexKey: a <col> is its position: the nth sizes the nth column.
              <col key={i} style={{ width }} />
            ))}
          </colgroup>
        ) : null}
        <thead>
          <tr>
            {headings.map((h, i) => (
              // biome-ignore lint/suspicious/noArrayIndexKey: a heading is its column's position; columns never reorder.
              <th key={i} className={typeof h === "string" ? undefined : h.className}>
                {typeof h === "string" ? h : h.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map(children)}
          {footer}
        </tbody>
      </table>
      {after}
    </div>
  );
}

/** The note under a table that shows the first rows of more: "Showing the first 50 of 1,234."; nothing when it shows all. */
export function FirstOf({ shown, total }: { shown: number; total: number }) {
  if (total <= shown) return null;
  return (
    <p className="small muted" style={{ padding: "0 0.75rem" }}>
      Showing the first {formatCount(shown)} of {formatCount(total)}.
    </p>
  );
}
