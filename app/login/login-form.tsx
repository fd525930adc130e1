"use client";

import { useActionState } from "react";
import { signIn, type LoginState } from "./actions";

export function LoginForm({ next }: { next: string }) {
  const [state, action, pending] = useActionState<LoginState, FormData>(signIn, {});
  return (
    <form action={action} className="form-stack" noValidate>
      <input type="hidden" name="next" value={next} />
      <label className="field">
        Username
        <input type="text" name="username" autoComplete="username" defaultValue={state.username} required autoFocus />
      </label>
      <label className="field">
        Password
        <input type="password" name="password" autoComplete="current-password" required />
      </label>
      <div aria-live="polite">{state.error ? <p className="form-error" role="alert">{state.error}</p> : null}</div>
      <button type="submit" disabled={pending}>
        {pending ? "Signing in…" : "Sign in"}
      </button>
    </form>
  );
}
