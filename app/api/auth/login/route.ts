import { formLogin } from "@/lib/http/form-login";
import { route } from "@/lib/http/api";

export const dynamic = "force-dynamic";

/**
 * Public: sign-in as an HTML form post (`application/x-www-form-urlencoded`: username, password,
 * next → 303) or JSON (→ 200 / 401 / 429 with Retry-After). The sign-in page posts here when
 * JavaScript is off.
 */
export const POST = route("public", formLogin, "POST /api/auth/login");
