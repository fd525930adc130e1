import { closeDb } from "@/lib/db/client";
import { env } from "@/lib/env";
import { ensureBootstrap } from "@/lib/auth/users";

const e = env();
const { createdAdmin } = await ensureBootstrap({
  adminPassword: e.BOUNDED_ADMIN_PASSWORD,
  bootstrapToken: e.BOUNDED_BOOTSTRAP_TOKEN,
});
if (createdAdmin?.generated) {
  // Printed once, on the terminal only (not through the JSON logger, whose lines may be shipped).
  process.stdout.write(
    `\n  First start: created the operator "admin" with the password\n\n      ${createdAdmin.password}\n\n  It is shown only this once. Change it with: npm run users -- add admin --role operator --password <new>\n\n`,
  );
} else if (createdAdmin) {
  process.stdout.write(`First start: created the operator "admin" with the password from BOUNDED_ADMIN_PASSWORD.\n`);
}
await closeDb();
