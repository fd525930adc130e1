/**
 * npm run provider:check [-- --timeout <seconds>]
 *
 * One small, harmless call to each outside service Bounded is configured for (every model
 * provider, OCR, the marketplace, the image provider), and what each said: reachable, key accepted, model
 * served, the limits its headers announce, the round trip. Needs neither PostgreSQL nor Redis.
 * Exits 0 when every service answered as expected, 1 with one sentence per problem otherwise, 2
 * when the environment or the arguments are wrong.
 */
import { env, EnvError, type Env } from "@/lib/env";
import { modelRouting, type ModelProvider } from "@/lib/model-providers";
import { checkServices, formatReport, parseCheckArgs, PROVIDER_CHECK_USAGE } from "./provider-check-services";
import { loadDotEnv } from "./preflight";

loadDotEnv(`${import.meta.dirname}/..`);

async function main(): Promise<number> {
  const args = parseCheckArgs(process.argv.slice(2));
  if ("error" in args) {
    console.error(`${args.error}\n${PROVIDER_CHECK_USAGE}`);
    return 2;
  }
  let e: Env;
  let providers: readonly ModelProvider[];
  try {
    e = env();
    providers = modelRouting().providers;
  } catch (err) {
    if (!(err instanceof EnvError)) throw err;
    console.error(`The environment is not valid: ${err.message}`);
    return 2;
  }
  const checks = await checkServices({ env: e, timeoutMs: args.timeoutMs, providers });
  console.log(formatReport(checks, args.timeoutMs));
  return checks.every((c) => c.ok) ? 0 : 1;
}

process.exitCode = await main();
