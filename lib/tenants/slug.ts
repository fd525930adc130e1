import { z } from "zod";

/** A tenant's name as every request that names one gives it: trimmed, lower-case, 2–63 characters. */
export const tenantSlugSchema = z
  .string({ error: "tenant is required" })
  .trim()
  .toLowerCase()
  // An empty field (a form without it) is "required", not a malformed name.
  .min(1, { error: "tenant is required", abort: true })
  .regex(/^[a-z0-9][a-z0-9-]{1,62}$/, "tenant must be 2–63 lower-case letters, digits or '-'")
  // The scheduled sweeps run as the tenant "system"; nobody may upload as it.
  .refine((slug) => slug !== "system", "tenant “system” is reserved");
