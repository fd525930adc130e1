/**
 * npm run packs -- grant <tenant> <units>
 * npm run packs -- show <tenant>
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { closeDb } from "@/lib/db/client";
import { getPack, grantUnits, type PackState } from "@/lib/quota/packs";
import { loadDotEnv } from "./preflight";

loadDotEnv(`${import.meta.dirname}/..`);

const usage = `usage:
  npm run packs -- grant <tenant> <units>    give a tenant 1–100,000 more image generations
  npm run packs -- show <tenant>             the tenant's pack: size, remaining, running, spent, open debts`;

const describe = (p: PackState) =>
  `${p.tenant}: ${p.remaining} of ${p.size} units remaining, ${p.live} held by running generations, ${p.spent} spent, ${p.openDebts} open debt(s)`;

async function main(): Promise<number> {
  const { positionals } = parseArgs({ allowPositionals: true, options: {} });
  const [command, tenant, units, ...rest] = positionals;
  if (!command || !tenant || rest.length > 0) {
    console.error(usage);
    return 2;
  }
  try {
    switch (command) {
      case "grant": {
        if (units === undefined || !/^\d+$/.test(units)) {
          console.error(
            `units must be a whole number, got ${units === undefined ? "nothing" : `"${units}"`}\n${usage}`,
          );
          return 2;
        }
        const g = await grantUnits({ tenant, units: Number(units) });
        console.log(
          `Granted ${g.granted} unit(s). ${describe(g)}.${g.debtsSettled > 0 ? ` ${g.debtsSettled} open debt(s) were paid from the new units.` : ""}`,
        );
        return 0;
      }
      case "show": {
        if (units !== undefined) {
          console.error(usage);
          return 2;
        }
        const p = await getPack(tenant);
        if (!p) {
          console.log(`${tenant.trim().toLowerCase()} has no pack: nothing can be generated until units are granted.`);
          return 1;
        }
        console.log(`${describe(p)}.`);
        return 0;
      }
      default:
        console.error(`Unknown command "${command}".\n${usage}`);
        return 2;
    }
  } catch (err) {
    if (err instanceof z.ZodError) {
      console.error(`${err.issues.map((i) => i.message).join("; ")}\n${usage}`);
      return 2;
    }
    throw err;
  }
}

main()
  .then(async (code) => {
    await closeDb();
    process.exit(code);
  })
  .catch(async (err) => {
    console.error(err instanceof Error ? err.message : String(err));
    await closeDb();
    process.exit(1);
  });
