import { describe, expect, it } from "vitest";
import { EnvError, parseEnv } from "./env";
import { failoverFor, fallbacksOf, parseModelRouting, providerVariables, routeFor } from "./model-providers";

const routingOf = (source: Record<string, string>) => parseModelRouting(source, parseEnv(source));

const BACKUP = {
  BOUNDED_MODEL_PROVIDERS: "backup",
  MODEL_BACKUP_BASE_URL: "https://backup.example/v1",
  MODEL_BACKUP_API_KEY: "sk-backup",
  MODEL_BACKUP_NAME: "backup-model-1",
};

describe("the model providers and their routes", () => {
  it("unconfigured: the provider of MODEL_BASE_URL alone, and every kind's calls go to it", () => {
    const routing = routingOf({ MODEL_BASE_URL: "https://api.example/v1", MODEL_NAME: "gpt-x" });
    expect(routing.providers).toMatchObject([
      { name: "primary", service: "model", baseUrl: "https://api.example/v1", model: "gpt-x", concurrency: 32 },
    ]);
    expect(routeFor("csv_import", routing).map((p) => p.name)).toEqual(["primary"]);
  });

  it("another provider with variables of its own, and a route per kind beside the default one", () => {
    const routing = routingOf({
      ...BACKUP,
      BOUNDED_PROVIDER_MODEL_BACKUP_CONCURRENCY: "4",
      BOUNDED_MODEL_BACKUP_TPM: "90000",
      BOUNDED_MODEL_ROUTE_AGENT_RUN: "primary, backup",
    });
    expect(routing.providers[1]).toEqual({
      name: "backup",
      service: "model:backup",
      baseUrl: "https://backup.example/v1",
      apiKey: "sk-backup",
      model: "backup-model-1",
      concurrency: 4,
      rps: 5,
      tpm: 90_000,
    });
    expect(routeFor("agent_run", routing).map((p) => p.name)).toEqual(["primary", "backup"]);
    expect(routeFor("csv_import", routing).map((p) => p.name)).toEqual(["primary"]);
    expect(routeFor(undefined, routing).map((p) => p.name)).toEqual(["primary"]);
    expect(
      routeFor("csv_import", routingOf({ ...BACKUP, BOUNDED_MODEL_ROUTE: "backup,primary" })).map((p) => p.name),
    ).toEqual(["backup", "primary"]);
  });

  it("a failover policy for every kind and one per kind: never keeps the route's first provider alone", () => {
    const routing = routingOf({
      ...BACKUP,
      BOUNDED_MODEL_ROUTE: "primary,backup",
      BOUNDED_MODEL_FAILOVER: "outage",
      BOUNDED_MODEL_FAILOVER_CSV_IMPORT: "never",
    });
    expect(failoverFor("agent_run", routing)).toBe("outage");
    expect(routeFor("agent_run", routing).map((p) => p.name)).toEqual(["primary", "backup"]);
    expect(failoverFor("csv_import", routing)).toBe("never");
    expect(routeFor("csv_import", routing).map((p) => p.name)).toEqual(["primary"]);
    expect(failoverFor(undefined, routingOf(BACKUP))).toBe("deadline");
  });

  it("every mistake is one line of the error, naming the variable and what to do", () => {
    const source = {
      BOUNDED_MODEL_PROVIDERS: "backup,Other,primary,spare",
      MODEL_BACKUP_BASE_URL: "not a url",
      MODEL_BACKUP_NAME: "m",
      BOUNDED_PROVIDER_MODEL_BACKUP_RPS: "-1",
      BOUNDED_MODEL_ROUTE: "primary,bakup",
      BOUNDED_MODEL_ROUTE_AGENT_RUN: "primary,primary",
      BOUNDED_MODEL_ROUTE_NOPE: "primary",
      BOUNDED_MODEL_FAILOVER_AGENT_RUN: "sometimes",
    };
    let error: unknown;
    try {
      routingOf(source);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(EnvError);
    const lines = (error as EnvError).message.split("\n").filter((l) => l.startsWith("  - "));
    expect(lines).toEqual([
      expect.stringMatching(/^ {2}- MODEL_BACKUP_BASE_URL: must be a URL/),
      expect.stringMatching(/^ {2}- BOUNDED_PROVIDER_MODEL_BACKUP_RPS: /),
      expect.stringMatching(/^ {2}- BOUNDED_MODEL_PROVIDERS: "Other" is not a provider name/),
      expect.stringMatching(/^ {2}- BOUNDED_MODEL_PROVIDERS: names "primary" \(the provider of MODEL_BASE_URL/),
      expect.stringMatching(/^ {2}- MODEL_SPARE_BASE_URL: required for the model provider "spare"/),
      expect.stringMatching(/^ {2}- MODEL_SPARE_NAME: required/),
      expect.stringMatching(/^ {2}- BOUNDED_MODEL_ROUTE: "bakup" is not a model provider \(there are: primary\)/),
      expect.stringMatching(/^ {2}- BOUNDED_MODEL_ROUTE_AGENT_RUN: names "primary" twice/),
      expect.stringMatching(/^ {2}- BOUNDED_MODEL_ROUTE_NOPE: no job kind "nope"/),
      expect.stringMatching(
        /^ {2}- BOUNDED_MODEL_FAILOVER_AGENT_RUN: "sometimes" is no failover policy \(there are: never, outage, deadline\)/,
      ),
    ]);
  });

  it("failover cost ceilings: per job and per tenant per day, each a positive amount, and every fallback priced", () => {
    const priced = {
      ...BACKUP,
      BOUNDED_MODEL_ROUTE: "primary,backup",
      BOUNDED_MODEL_PRICES: '{"backup-model-1":{"prompt":0.3,"completion":1.2}}',
    };
    expect(routingOf(priced).ceiling).toEqual({ perJobUsd: undefined, perTenantDayUsd: undefined });
    expect(
      routingOf({
        ...priced,
        BOUNDED_FAILOVER_MAX_USD_PER_JOB: "0.50",
        BOUNDED_FAILOVER_MAX_USD_PER_TENANT_DAY: "20",
      }).ceiling,
    ).toEqual({ perJobUsd: 0.5, perTenantDayUsd: 20 });
    const error = (() => {
      try {
        routingOf({
          ...BACKUP,
          BOUNDED_MODEL_ROUTE: "primary,backup",
          BOUNDED_FAILOVER_MAX_USD_PER_JOB: "-1",
          BOUNDED_FAILOVER_MAX_USD_PER_TENANT_DAY: "5",
        });
      } catch (e) {
        return e as EnvError;
      }
    })();
    expect(error?.message.split("\n").filter((l) => l.startsWith("  - "))).toEqual([
      '  - BOUNDED_FAILOVER_MAX_USD_PER_JOB: must be a positive amount of USD, as 0.50 (got "-1")',
      '  - BOUNDED_MODEL_PRICES: has no price for backup-model-1, the model of the fallback "backup": a failover cost ceiling needs one',
    ]);
  });

  it("knows where a provider's calls go while it is down: the providers after it on any route that fails over", () => {
    expect(fallbacksOf("model", routingOf(BACKUP))).toEqual([]);
    const routed = routingOf({ ...BACKUP, BOUNDED_MODEL_ROUTE_AGENT_RUN: "primary,backup" });
    expect(fallbacksOf("model", routed)).toEqual(["backup"]);
    expect(fallbacksOf("model:backup", routed)).toEqual([]);
    expect(
      fallbacksOf(
        "model",
        routingOf({ ...BACKUP, BOUNDED_MODEL_ROUTE: "primary,backup", BOUNDED_MODEL_FAILOVER: "never" }),
      ),
    ).toEqual([]);
  });

  it("names the variables of each provider, for a misconfiguration's words", () => {
    expect(providerVariables("model")).toBe("MODEL_BASE_URL, MODEL_API_KEY, MODEL_NAME");
    expect(providerVariables("model:backup")).toBe("MODEL_BACKUP_BASE_URL, MODEL_BACKUP_API_KEY, MODEL_BACKUP_NAME");
  });
});
