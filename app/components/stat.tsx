import Link from "next/link";
import type { ReactNode } from "react";

/**
 * One headline number in a `grid cols-4` summary: a label over a large value, red when it needs
 * attention, and a link to the page that explains it when there is one.
 */
export function Stat({
  label,
  value,
  href,
  alert = false,
  testId,
  stat,
  children,
}: {
  label: ReactNode;
  value: ReactNode;
  href?: string;
  alert?: boolean;
  /** `data-testid` of the value. */
  testId?: string;
  /** `data-stat` of the value. */
  stat?: string;
  /** Lines under the value. */
  children?: ReactNode;
}) {
  const body = (
    <>
      <div className="label">{label}</div>
      <div className="value" data-testid={testId} data-stat={stat}>
        {value}
      </div>
      {children}
    </>
  );
  const className = alert ? "stat alert" : "stat";
  return href ? (
    <Link className={className} href={href}>
      {body}
    </Link>
  ) : (
    <div className={className}>{body}</div>
  );
}
