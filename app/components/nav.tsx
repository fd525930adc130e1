"use client";

import Link from "next/link";
import { usePathname } from "next/navigation";
import { useRef, useState, type KeyboardEvent } from "react";

const ITEMS: { href: string; label: string; ready: boolean }[] = [
  { href: "/", label: "Overview", ready: true },
  { href: "/jobs", label: "Jobs", ready: true },
  { href: "/queues", label: "Queues", ready: true },
  { href: "/stuck", label: "Stuck", ready: true },
  { href: "/model-calls", label: "Model calls", ready: true },
  { href: "/limiter", label: "Limiter", ready: true },
  { href: "/reserves", label: "Reserves", ready: true },
  { href: "/budgets", label: "Budgets", ready: true },
  { href: "/database", label: "Database", ready: true },
  { href: "/webhooks", label: "Webhooks", ready: true },
  { href: "/audit", label: "Audit", ready: true },
];

/**
 * The main navigation. On a wide screen every link is in the top bar; on a narrow one (see
 * `.nav-toggle` in globals.css) a menu button names the current page and opens the links as a list.
 */
export function Nav() {
  const path = usePathname();
  const [open, setOpen] = useState(false);
  const toggle = useRef<HTMLButtonElement>(null);
  const current = (href: string) => (href === "/" ? path === "/" : path === href || path.startsWith(`${href}/`));
  const here = ITEMS.find((item) => current(item.href))?.label ?? "Menu";
  // Escape closes the menu and gives focus back to its button, as a disclosure should.
  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key === "Escape" && open) {
      setOpen(false);
      toggle.current?.focus();
    }
  };
  return (
    <>
      <button
        ref={toggle}
        type="button"
        className="nav-toggle"
        aria-expanded={open}
        aria-controls="main-nav"
        aria-label={`Menu, current page: ${here}`}
        onClick={() => setOpen((o) => !o)}
        onKeyDown={onKeyDown}
      >
        <span className="nav-toggle-icon" aria-hidden="true">
          {open ? "✕" : "☰"}
        </span>
        {here}
      </button>
      <nav id="main-nav" className={open ? "nav open" : "nav"} aria-label="Main" onKeyDown={onKeyDown}>
        {ITEMS.map((item) =>
          item.ready ? (
            <Link
              key={item.href}
              href={item.href}
              aria-current={current(item.href) ? "page" : undefined}
              onClick={() => setOpen(false)}
            >
              {item.label}
            </Link>
          ) : (
            <span key={item.href} className="soon" title="Not available yet" aria-disabled="true">
              {item.label}
            </span>
          ),
        )}
      </nav>
    </>
  );
}
