"use server";

import { redirect } from "next/navigation";
import { recordRefusalQuietly } from "@/lib/audit/refusals";
import { loginErrorMessage } from "@/lib/http/form-login";
import { login, loginSchema, logout } from "@/lib/auth/login";
import { safeNext } from "@/lib/auth/safe-next";
import { clientAddress } from "@/lib/security/client-address";

export interface LoginState {
  error?: string;
  username?: string;
}

export async function signIn(_prev: LoginState, form: FormData): Promise<LoginState> {
  const parsed = loginSchema.safeParse({ username: form.get("username"), password: form.get("password") });
  const username = typeof form.get("username") === "string" ? String(form.get("username")).slice(0, 64) : "";
  if (!parsed.success)
    return { error: parsed.error.issues[0]?.message ?? "Enter your username and password.", username };
  const address = await clientAddress();
  const result = await login(parsed.data, address);
  if (result.type !== "ok") {
    const status = result.type === "throttled" ? 429 : 401;
    await recordRefusalQuietly({
      principal: null,
      address,
      route: "action signIn",
      status,
      reason: loginErrorMessage(result),
    });
  }
  switch (result.type) {
    case "invalid":
      return { error: "Wrong username or password.", username };
    case "throttled":
      return { error: loginErrorMessage(result), username };
    case "ok":
      redirect(safeNext(form.get("next")));
  }
}

export async function signOut(): Promise<void> {
  await logout();
  redirect("/login");
}
