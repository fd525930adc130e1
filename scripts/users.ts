/**
 * npm run users -- add <name> --role viewer|operator [--password <pw>]
 * npm run users -- passwd <name> [--password <pw>]   (signs the user out everywhere)
 * npm run users -- token <name> [--name <label>]
 * npm run users -- revoke <name>
 */
import { parseArgs } from "node:util";
import { closeDb } from "@/lib/db/client";
import { closeRedis } from "@/lib/redis/client";
import { changePassword, issueToken, revokeTokens, roleSchema, upsertUser, usernameSchema } from "@/lib/auth/users";
import { loadDotEnv } from "./preflight";

loadDotEnv(`${import.meta.dirname}/..`);

const usage = `usage:
  npm run users -- add <name> --role viewer|operator [--password <password>]
  npm run users -- passwd <name> [--password <password>]
  npm run users -- token <name> [--name <label>]
  npm run users -- revoke <name>`;

async function main(): Promise<number> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: { role: { type: "string" }, password: { type: "string" }, name: { type: "string" } },
  });
  const [command, username] = positionals;
  if (!command || !username) {
    console.error(usage);
    return 2;
  }
  const name = usernameSchema.safeParse(username);
  if (!name.success) {
    console.error(`Invalid user name "${username}": ${name.error.issues[0]?.message}`);
    return 2;
  }
  switch (command) {
    case "add": {
      const role = roleSchema.safeParse(values.role);
      if (!role.success) {
        console.error(`--role must be viewer or operator\n${usage}`);
        return 2;
      }
      if (values.password !== undefined && values.password.length < 8) {
        console.error("--password must be at least 8 characters");
        return 2;
      }
      const { user, password } = await upsertUser({ username: name.data, role: role.data, password: values.password });
      console.log(`User "${user.username}" (${user.role}) is ready.`);
      if (!values.password) console.log(`Password (shown once): ${password}`);
      return 0;
    }
    case "passwd": {
      if (values.password !== undefined && values.password.length < 8) {
        console.error("--password must be at least 8 characters");
        return 2;
      }
      const password = await changePassword(name.data, values.password);
      console.log(`Password of "${name.data}" changed; every session of the user has ended.`);
      if (!values.password) console.log(`Password (shown once): ${password}`);
      return 0;
    }
    case "token": {
      const token = await issueToken(name.data, values.name ?? "cli");
      console.log(`API token for "${name.data}" (shown once; send it as "Authorization: Bearer <token>"):\n${token}`);
      return 0;
    }
    case "revoke": {
      const count = await revokeTokens(name.data);
      console.log(`Revoked ${count} token(s) of "${name.data}".`);
      return 0;
    }
    default:
      console.error(`Unknown command "${command}".\n${usage}`);
      return 2;
  }
}

main()
  .then(async (code) => {
    await closeRedis();
    await closeDb();
    process.exit(code);
  })
  .catch(async (err) => {
    console.error(err instanceof Error ? err.message : String(err));
    await closeRedis();
    await closeDb();
    process.exit(1);
  });
