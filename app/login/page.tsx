import type { Metadata } from "next";
import { LOGIN_ERRORS, type LoginError } from "@/lib/http/form-login";
import { LoginForm } from "./login-form";

export const metadata: Metadata = { title: "Sign in" };

type Search = { next?: string; error?: string; username?: string };

export default async function LoginPage({ searchParams }: { searchParams: Promise<Search> }) {
  const { next, error, username } = await searchParams;
  // Set by the form post without JavaScript (/api/auth/login) when it sends the visitor back.
  const message =
    typeof error === "string" && Object.hasOwn(LOGIN_ERRORS, error) ? LOGIN_ERRORS[error as LoginError] : undefined;
  return (
    <main className="narrow" style={{ maxWidth: 420 }}>
      <div className="panel">
        <h1>Bounded</h1>
        <p className="muted">Sign in to the operations dashboard.</p>
        <LoginForm
          next={typeof next === "string" ? next : "/"}
          initial={{ error: message, username: typeof username === "string" ? username.slice(0, 64) : undefined }}
        />
      </div>
      <p className="muted small">
        Waiting for an upload? Your progress link shows it without signing in. <a href="/upload">Upload a file</a>.
      </p>
    </main>
  );
}
