import { execFile } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseEnv } from "@/lib/env";
import { startSimulators, type RunningSimulators } from "@/workers/simulators/server";
import {
  checkMarketplace,
  checkModel,
  checkOcr,
  describeAnnouncedLimits,
  parseCheckArgs,
} from "./provider-check-services";

/**
 * `npm run provider:check` as a person runs it: the script in a process of its own, against the
 * simulators on a free port, configured right and then wrong in each of the ways people get it
 * wrong. The rarer ways are checked in this process, through the same function (a process costs
 * seconds to start on a busy machine).
 */

const root = `${import.meta.dirname}/..`;
const apiKey = "sk-provider-check-right-key-0123456789";
const backupKey = "sk-provider-check-backup-key-0123456789";
let sim: RunningSimulators;

beforeAll(async () => {
  sim = await startSimulators({
    port: 0,
    model: { errorRate: 0, timeScale: 0.001, apiKey, models: ["bounded-sim-1"] },
    backupModel: { errorRate: 0, timeScale: 0.001, apiKey: backupKey },
    ocr: { errorRate: 0, timeScale: 0.001 },
    marketplace: { latencyMs: () => 0 },
  });
});
afterAll(() => sim.close());

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the script with the simulators (`on`, by default the shared ones) as every service, `overrides` on top. */
function providerCheck(
  overrides: Record<string, string> = {},
  args: string[] = [],
  on: RunningSimulators = sim,
): Promise<Run> {
  const env = {
    ...process.env,
    MODEL_BASE_URL: on.modelBaseUrl,
    MODEL_API_KEY: apiKey,
    MODEL_NAME: "bounded-sim-1",
    OCR_BASE_URL: on.url,
    MARKETPLACE_BASE_URL: `${on.url}/marketplace`,
    IMAGE_PROVIDER_BASE_URL: `${on.url}/images`,
    LOG_LEVEL: "silent",
    ...overrides,
  };
  return new Promise((resolve) => {
    execFile(
      `${root}/node_modules/.bin/tsx`,
      ["scripts/provider-check.ts", ...args],
      { cwd: root, env, timeout: 60_000 },
      (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr });
      },
    );
  });
}

const problems = (run: Run) => run.stdout.split("\n").filter((l) => l.startsWith("- "));

// One after the other: on a busy machine, processes started side by side only wait for each other.
// Starting one (tsx, the clients) is most of the seconds each run takes, hence the longer timeout.
describe("npm run provider:check", { timeout: 60_000 }, () => {
  it("reports every service reachable, the key accepted, the model served and the limits the headers announce, and exits 0", async () => {
    const run = await providerCheck();
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^model\s+ok\s+http:\/\/127\.0\.0\.1:\d+\/v1$/m);
    expect(run.stdout).toContain("auth: ok (MODEL_API_KEY accepted)");
    expect(run.stdout).toContain("model: bounded-sim-1 exists");
    expect(run.stdout).toMatch(/limits: [\d,]+ requests per minute \([\d,]+ left.*\); [\d,]+ tokens per minute/);
    expect(run.stdout).toMatch(/reachable: yes, answered 200 in \d+(\.\d)? m?s/);
    for (const service of ["ocr", "marketplace", "images"])
      expect(run.stdout).toMatch(new RegExp(`^${service}\\s+ok\\s`, "m"));
    expect(run.stdout).toContain("All 4 services answered as expected.");
    expect(run.stdout).not.toContain(apiKey);
  });

  it("names MODEL_API_KEY when the key is refused, and never prints the key", async () => {
    const wrong = "sk-provider-check-wrong-key-9876543210";
    const run = await providerCheck({ MODEL_API_KEY: wrong });
    expect(run.code).toBe(1);
    expect(problems(run)).toEqual([
      `- The model service at ${sim.modelBaseUrl} answered 401: Incorrect API key provided: sk-${"*".repeat(wrong.length - 7)}3210. You can find your API key at https://platform.openai.com/account/api-keys. — check MODEL_API_KEY.`,
    ]);
    expect(run.stdout).not.toContain(wrong);
  });

  it("names MODEL_BASE_URL and the /v1 it needs when the base URL's path is wrong", async () => {
    const run = await providerCheck({ MODEL_BASE_URL: sim.url });
    expect(run.code).toBe(1);
    expect(problems(run)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^- The model service at ${sim.url} answered 404: Unknown request URL: POST /chat/completions\\..* — check MODEL_BASE_URL: it is the API's base URL with /v1`,
        ),
      ),
    ]);
  });

  it("checks every model provider configured, and names the one configured wrong with its own variables", async () => {
    const backup = {
      BOUNDED_MODEL_PROVIDERS: "backup",
      MODEL_BACKUP_BASE_URL: sim.backupModelBaseUrl,
      MODEL_BACKUP_API_KEY: backupKey,
      MODEL_BACKUP_NAME: "bounded-sim-backup-1",
    };
    const right = await providerCheck(backup);
    expect(right.code).toBe(0);
    expect(right.stdout).toMatch(/^model:backup\s+ok\s+http:\/\/127\.0\.0\.1:\d+\/backup\/v1$/m);
    expect(right.stdout).toContain("auth: ok (MODEL_BACKUP_API_KEY accepted)");
    expect(right.stdout).toContain("All 5 services answered as expected.");
    const wrong = await providerCheck({ ...backup, MODEL_BACKUP_NAME: "bounded-sim-1" });
    expect(wrong.code).toBe(1);
    expect(problems(wrong)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^- The model provider backup at ${sim.backupModelBaseUrl} answered 404: .* — check MODEL_BACKUP_NAME\\. It serves: bounded-sim-backup-1\\.$`,
        ),
      ),
    ]);
    expect(wrong.stdout).not.toContain(backupKey);
  });

  it("reports a service that accepts the call and never answers as silent after the timeout, not waiting for it", async () => {
    const silent = await startSimulators({
      port: 0,
      silent: ["model", "images"],
      ocr: { errorRate: 0, timeScale: 0.001 },
      marketplace: { latencyMs: () => 0 },
    });
    try {
      const run = await providerCheck({}, ["--timeout", "1"], silent);
      expect(run.code).toBe(1);
      expect(problems(run)).toEqual([
        `- The model service at ${silent.modelBaseUrl} did not answer within 1 s — it is silent or unreachable: check the provider's status page and the network between here and it.`,
        `- The image provider at ${silent.url}/images did not answer within 1 s — it is silent or unreachable: check the service's status and the network between here and it.`,
      ]);
      expect(run.stdout).toMatch(/^ocr\s+ok\s/m);
    } finally {
      await silent.close();
    }
  });
});

describe("the checks' sentences, in process", () => {
  const options = (overrides: Record<string, string>) => ({
    env: parseEnv({
      MODEL_BASE_URL: sim.modelBaseUrl,
      MODEL_API_KEY: apiKey,
      MODEL_NAME: "bounded-sim-1",
      ...overrides,
    }),
    timeoutMs: 5_000,
  });

  it("names MODEL_BASE_URL when nothing listens there", async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const check = await checkModel(options({ MODEL_BASE_URL: `http://127.0.0.1:${port}/v1` }));
    expect(check).toMatchObject({
      ok: false,
      problem: `The model service at http://127.0.0.1:${port}/v1 could not be reached (Error: connect ECONNREFUSED 127.0.0.1:${port}) — check MODEL_BASE_URL.`,
    });
  });

  it("names MODEL_NAME, and the models the service does serve, when the model is unknown", async () => {
    const check = await checkModel(options({ MODEL_NAME: "gpt-typo" }));
    expect(check).toMatchObject({
      ok: false,
      problem: `The model service at ${sim.modelBaseUrl} answered 404: The model \`gpt-typo\` does not exist or you do not have access to it. — check MODEL_NAME. It serves: bounded-sim-1.`,
    });
  });

  it("keeps the key out of the report even when a provider echoes it whole", async () => {
    const echo = http.createServer((req, res) => {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          error: {
            message: `bad key ${req.headers.authorization}`,
            type: "invalid_request_error",
            param: null,
            code: "invalid_api_key",
          },
        }),
      );
    });
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    try {
      const check = await checkModel(
        options({ MODEL_BASE_URL: `http://127.0.0.1:${(echo.address() as AddressInfo).port}/v1` }),
      );
      expect(JSON.stringify(check)).not.toContain(apiKey);
      expect(check.problem).toContain("answered 401: bad key Bearer [MODEL_API_KEY] — check MODEL_API_KEY.");
    } finally {
      await new Promise((resolve) => echo.close(resolve));
    }
  });

  it("takes a 429 for a spent rate limit as a working key, and OpenAI's insufficient_quota 429 as a problem naming the billing", async () => {
    let code = "rate_limit_exceeded";
    const provider = http.createServer((_req, res) => {
      res.writeHead(429, {
        "content-type": "application/json",
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "6s",
      });
      res.end(
        JSON.stringify({
          error: {
            message:
              code === "insufficient_quota"
                ? "You exceeded your current quota, please check your plan and billing details."
                : "Rate limit reached for requests",
            type: code === "insufficient_quota" ? "insufficient_quota" : "requests",
            param: null,
            code,
          },
        }),
      );
    });
    await new Promise<void>((resolve) => provider.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;
    try {
      const limited = await checkModel(options({ MODEL_BASE_URL: url }));
      expect(limited.ok).toBe(true);
      expect(limited.problem).toBeUndefined();
      expect(limited.details).toContain("limits: 500 requests per minute (0 left, whole again in 6 s)");
      code = "insufficient_quota";
      expect(await checkModel(options({ MODEL_BASE_URL: url }))).toMatchObject({
        ok: false,
        problem: `The model service at ${url} answered 429: You exceeded your current quota, please check your plan and billing details. — the account has no quota left: check the provider's plan and billing.`,
      });
    } finally {
      await new Promise((resolve) => provider.close(resolve));
    }
  });

  it("shows the limits a provider's headers announce, OpenAI's and Anthropic's, with what is left and when it is whole again", () => {
    const openai = new Headers({
      "x-ratelimit-limit-requests": "500",
      "x-ratelimit-remaining-requests": "499",
      "x-ratelimit-reset-requests": "120ms",
      "x-ratelimit-limit-tokens": "200000",
      "x-ratelimit-remaining-tokens": "199990",
      "x-ratelimit-reset-tokens": "3ms",
    });
    expect(describeAnnouncedLimits((n) => openai.get(n))).toBe(
      "limits: 500 requests per minute (499 left, whole again in 120 ms); 200,000 tokens per minute (199,990 left, whole again in 3 ms)",
    );
    const inAMinute = new Date(Date.now() + 60_000).toISOString();
    const anthropic = new Headers({
      "anthropic-ratelimit-requests-limit": "50",
      "anthropic-ratelimit-requests-remaining": "49",
      "anthropic-ratelimit-requests-reset": inAMinute,
      "anthropic-ratelimit-input-tokens-limit": "40000",
      "anthropic-ratelimit-input-tokens-remaining": "39000",
      "anthropic-ratelimit-input-tokens-reset": inAMinute,
      "anthropic-ratelimit-output-tokens-limit": "8000",
      "anthropic-ratelimit-output-tokens-remaining": "8000",
      "anthropic-ratelimit-output-tokens-reset": inAMinute,
    });
    expect(describeAnnouncedLimits((n) => anthropic.get(n))).toMatch(
      /^limits: 50 requests per minute \(49 left, whole again in .*\); 40,000 input tokens per minute \(39,000 left, whole again in .*\); 8,000 output tokens per minute \(8,000 left, whole again in .*\)$/,
    );
    expect(describeAnnouncedLimits(() => null)).toBe(
      "limits: none announced (no x-ratelimit-* or anthropic-ratelimit-* headers)",
    );
  });

  it("takes a 429 of OCR or the marketplace for a service that is there (its limit spent), and a 5xx or a refusal for a problem naming the setting", async () => {
    let status = 429;
    const service = http.createServer((_req, res) => {
      res.writeHead(status, { "content-type": "application/json", ...(status === 429 ? { "retry-after": "7" } : {}) });
      res.end(
        JSON.stringify({
          error: {
            message: status === 429 ? "slow down" : status === 403 ? "this client is not allowed" : "broken",
            type: "x",
          },
        }),
      );
    });
    await new Promise<void>((resolve) => service.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
    const on = { env: parseEnv({ OCR_BASE_URL: base, MARKETPLACE_BASE_URL: base }), timeoutMs: 5_000 };
    try {
      expect(await checkOcr(on)).toMatchObject({
        ok: true,
        details: [
          expect.stringMatching(
            /^reachable: yes, answered 429 in .* \(its rate limit is spent right now; it asks to wait 7 s\)$/,
          ),
        ],
      });
      expect(await checkMarketplace(on)).toMatchObject({ ok: true });
      status = 503;
      expect(await checkOcr(on)).toMatchObject({
        ok: false,
        problem: `The OCR service at ${base} answered 503: broken — the service is failing: check its status, then try again.`,
      });
      status = 403;
      expect(await checkMarketplace(on)).toMatchObject({
        ok: false,
        problem: `The marketplace at ${base} answered 403: this client is not allowed — it wants credentials Bounded does not send: check MARKETPLACE_BASE_URL.`,
      });
    } finally {
      await new Promise((resolve) => service.close(resolve));
    }
  });

  it("takes --timeout in seconds, 20 s by default, and refuses anything else with a sentence", () => {
    expect(parseCheckArgs([])).toEqual({ timeoutMs: 20_000 });
    expect(parseCheckArgs(["--timeout", "1.5"])).toEqual({ timeoutMs: 1_500 });
    expect(parseCheckArgs(["--timeout", "soon"])).toEqual({
      error: '--timeout must be a number of seconds above 0 and at most 600, got "soon"',
    });
    expect(parseCheckArgs(["--timeout", "0"])).toMatchObject({ error: expect.stringContaining("above 0") });
    expect(parseCheckArgs(["--verbose"])).toMatchObject({ error: expect.stringContaining("--verbose") });
  });
});
