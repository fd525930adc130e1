import type { ReactNode } from "react";
import styles from "./chart-with-summary.module.css";

/**
 * A chart in a titled panel with its figures beside it: the summary gives screen readers, and
 * people who want numbers rather than shapes, what the chart shows.
 */
export function ChartWithSummary({
  titleId,
  title,
  children,
  summary,
  summaryLabel,
  summaryTestId,
  summaryClassName,
}: {
  titleId: string;
  title: ReactNode;
  /** The chart, or what stands in for it. */
  children: ReactNode;
  summary: ReactNode;
  summaryLabel: string;
  summaryTestId: string;
  /** The page's own rules for the summary, added to the shared ones. */
  summaryClassName?: string;
}) {
  return (
    <div className={styles.layout}>
      <section className="panel" aria-labelledby={titleId}>
        <h2 id={titleId}>{title}</h2>
        {children}
      </section>
      <aside
        className={`panel ${styles.summary}${summaryClassName ? ` ${summaryClassName}` : ""}`}
        aria-label={summaryLabel}
        data-testid={summaryTestId}
      >
        {summary}
      </aside>
    </div>
  );
}
