"use client";

import { useActionState, useTransition, type FormEvent } from "react";
import { signIn, type LoginState } from "./actions";

/**
 * Without JavaScript the form is a plain post to /api/auth/login (which answers with a redirect);
 * with it, the submit runs the server action and the error shows in place.
 */
export function LoginForm({ next, initial }: { next: string; initial: LoginState }) {
  const [state, action, pending] = useActionState<LoginState, FormData>(signIn, initial);
  const [, startTransition] = useTransition();
  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    startTransition(() => action(form));
  };
  return (
    <form action="/api/auth/login" method="post" onSubmit={submit} className="form-stack" noValidate>
      <input type="hidden" name="next" value={next} />
      <label className="field">
        Username
        {/* biome-ignore lint/a11y/noAutofocus: signing in is the page's only task; nothing before the form is skipped. */}
        <input type="text" name="username" autoComplete="username" defaultValue={state.username} required autoFocus />
      </label>
      <label className="field">
        Password
        <input type="password" name="password" autoComplete="current-password" required />
      </label>
      <div aria-live="polite">
        {state.error ? (
          <p className="form-error" role="alert">
            {state.error}
          </p>
        ) : null}
      </div>
      <button type="submit" disabled={pending}>
        {pending ? "Signing in…" : "Sign in"}
      </button>
    </form>
  );
}
