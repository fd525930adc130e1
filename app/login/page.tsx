import type { Metadata } from "next";
import { LoginForm } from "./login-form";

export const metadata: Metadata = { title: "Sign in" };

export default async function LoginPage({ searchParams }: { searchParams: Promise<{ next?: string }> }) {
  const { next } = await searchParams;
  return (
    <main className="narrow" style={{ maxWidth: 420 }}>
      <div className="panel">
        <h1>Bounded</h1>
        <p className="muted">Sign in to the operations dashboard.</p>
        <LoginForm next={typeof next === "string" ? next : "/"} />
      </div>
      <p className="muted small">
        Waiting for an upload? Your progress link shows it without signing in. <a href="/upload">Upload a file</a>.
      </p>
    </main>
  );
}
