"use client";

import { useRouter } from "next/navigation";
import { useState, type FormEvent } from "react";

/**
 * The submit flow the public upload pages share: check the form in the browser, post it to the
 * API, follow to the progress page on 201, or show the API's message (or a network problem).
 */
export function useUpload(endpoint: string, check: (form: FormData) => string | null) {
  const router = useRouter();
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  async function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setError(null);
    const form = new FormData(event.currentTarget);
    const problem = check(form);
    if (problem) {
      setError(problem);
      return;
    }
    setPending(true);
    try {
      const response = await fetch(endpoint, { method: "POST", body: form });
      const body = await response.json().catch(() => null);
      if (response.status === 201 && body?.progressUrl) {
        router.push(body.progressUrl);
        return;
      }
      setError(body?.error?.message ?? `The upload failed (HTTP ${response.status}). Try again.`);
    } catch {
      setError("The upload did not reach the server. Check your connection and try again.");
    }
    setPending(false);
  }

  return { error, pending, onSubmit };
}

/** A chosen file (an empty file input still submits a nameless, empty File). */
export const isChosenFile = (f: FormDataEntryValue | null): f is File =>
  f instanceof File && !(f.size === 0 && f.name === "");
