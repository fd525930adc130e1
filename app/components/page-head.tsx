import type { ReactNode } from "react";

/**
 * The heading every operations page opens with: its title, a muted line saying what the page
 * shows (and how fresh it is), and optional controls on the right.
 */
export function PageHead({
  title,
  description,
  actions,
}: {
  title: ReactNode;
  description?: ReactNode;
  actions?: ReactNode;
}) {
  return (
    <div className="page-head">
      <div>
        <h1>{title}</h1>
        {description !== undefined ? <p className="muted">{description}</p> : null}
      </div>
      {actions}
    </div>
  );
}
