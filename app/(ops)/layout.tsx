import Link from "next/link";
import type { ReactNode } from "react";
import { headers } from "next/headers";
import { requirePageViewer } from "@/lib/auth/principal";
import { env } from "@/lib/env";
import { LiveRefresh } from "../components/live-refresh";
import { Nav } from "../components/nav";
import { QueryProvider } from "../components/query-provider";
import { signOut } from "../login/actions";

export const dynamic = "force-dynamic";

/** Every operations page is behind sign-in; the check runs on the server for each request. */
export default async function OpsLayout({ children }: { children: ReactNode }) {
  const path = (await headers()).get("x-bounded-path") ?? "/";
  const principal = await requirePageViewer(path);
  const timeScale = env().BOUNDED_TIME_SCALE;
  return (
    <QueryProvider>
      <header className="topbar">
        <Link href="/" className="brand">
          Bounded
        </Link>
        {/* Said once, here: every duration on these pages is production time, whatever the scale. */}
        {timeScale !== 1 ? (
          <span
            className="badge warn"
            data-testid="time-scale"
            title={`Every duration runs at ${timeScale}× real time (BOUNDED_TIME_SCALE). Durations on these pages are production time.`}
          >
            Time scale {timeScale}
          </span>
        ) : null}
        <Nav />
        <div className="who">
          <span>
            {principal.username} · <strong>{principal.role}</strong>
          </span>
          <form action={signOut}>
            <button type="submit">Sign out</button>
          </form>
        </div>
      </header>
      <LiveRefresh />
      {children}
    </QueryProvider>
  );
}
