"use client";

import Link from "next/link";
import { usePathname } from "next/navigation";

const ITEMS: { href: string; label: string; ready: boolean }[] = [
  { href: "/", label: "Overview", ready: true },
  { href: "/jobs", label: "Jobs", ready: true },
  { href: "/stuck", label: "Stuck", ready: true },
  { href: "/model-calls", label: "Model calls", ready: true },
  { href: "/limiter", label: "Limiter", ready: true },
  { href: "/reserves", label: "Reserves", ready: true },
  { href: "/budgets", label: "Budgets", ready: true },
  { href: "/database", label: "Database", ready: true },
  { href: "/audit", label: "Audit", ready: true },
];

export function Nav() {
  const path = usePathname();
  const current = (href: string) => (href === "/" ? path === "/" : path === href || path.startsWith(`${href}/`));
  return (
    <nav className="nav" aria-label="Main">
      {ITEMS.map((item) =>
        item.ready ? (
          <Link key={item.href} href={item.href} aria-current={current(item.href) ? "page" : undefined}>
            {item.label}
          </Link>
        ) : (
          <span key={item.href} className="soon" title="Not available yet" aria-disabled="true">
            {item.label}
          </span>
        ),
      )}
    </nav>
  );
}
