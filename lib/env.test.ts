import { describe, expect, it } from "vitest";
import { EnvError, hasHashTag, parseEnv } from "./env";

/** The message of the EnvError `parseEnv(source)` throws (fails the test if it does not throw one). */
function envErrorOf(source: Record<string, string | undefined>): string {
  try {
    parseEnv(source);
  } catch (err) {
    expect(err).toBeInstanceOf(EnvError);
    return (err as EnvError).message;
  }
  throw new Error(`parseEnv accepted ${JSON.stringify(source)}`);
}

describe("parseEnv defaults", () => {
  it("an empty environment starts the system against the local PostgreSQL and Redis with production time", () => {
    const parsed = parseEnv({});
    expect(parsed.DATABASE_URL).toBe("postgresql://postgres@127.0.0.1:5432/bounded");
    expect(parsed.REDIS_URL).toBe("redis://127.0.0.1:6379");
    expect(parsed.BOUNDED_REDIS_PREFIX).toBe("bounded");
    expect(parsed.PORT).toBe(3000);
    expect(parsed.BOUNDED_TIME_SCALE).toBe(1);
    expect(parsed.BOUNDED_DEMO).toBe(true);
    expect(parsed.NODE_ENV).toBe("development");
    expect(parsed.MODEL_BASE_URL).toBe("http://127.0.0.1:4010/v1");
    expect(parsed.BOUNDED_SIM_PORT).toBe(4010);
    expect(parsed.BOUNDED_UPLOAD_MAX_BYTES).toBe(10 * 1024 * 1024);
    expect(parsed.BOUNDED_UPLOAD_MAX_ROWS).toBe(50_000);
    expect(parsed.LOG_LEVEL).toBe("info");
  });

  it("leaves secrets and budget overrides unset when nobody chose them (no silent fallback budget)", () => {
    const parsed = parseEnv({});
    expect(parsed.BOUNDED_ADMIN_PASSWORD).toBeUndefined();
    expect(parsed.BOUNDED_BOOTSTRAP_TOKEN).toBeUndefined();
    expect(parsed.BOUNDED_SESSION_SECRET).toBeUndefined();
    expect(parsed.MODEL_API_KEY).toBeUndefined();
    expect(parsed.BOUNDED_BUDGET_IMPORTS_SOFT_S).toBeUndefined();
    expect(parsed.BOUNDED_BUDGET_IMPORTS_HARD_S).toBeUndefined();
  });

  it("coerces numeric and flag variables from their string form", () => {
    const parsed = parseEnv({
      PORT: "8080",
      BOUNDED_TIME_SCALE: "0.001",
      BOUNDED_DEMO: "0",
      BOUNDED_SECURE_COOKIES: "1",
      BOUNDED_BUDGET_IMPORTS_SOFT_S: "30",
    });
    expect(parsed.PORT).toBe(8080);
    expect(parsed.BOUNDED_TIME_SCALE).toBe(0.001);
    expect(parsed.BOUNDED_DEMO).toBe(false);
    expect(parsed.BOUNDED_SECURE_COOKIES).toBe(true);
    expect(parsed.BOUNDED_BUDGET_IMPORTS_SOFT_S).toBe(30);
  });

  it("accepts both postgres:// and postgresql:// database URLs", () => {
    expect(parseEnv({ DATABASE_URL: "postgres://u@db:5432/x" }).DATABASE_URL).toBe("postgres://u@db:5432/x");
    expect(parseEnv({ DATABASE_URL: "postgresql://u@db:5432/x" }).DATABASE_URL).toBe("postgresql://u@db:5432/x");
  });
});

describe("parseEnv: an empty value means the default", () => {
  it("treats empty strings as unset, as .env tooling does", () => {
    const parsed = parseEnv({
      DATABASE_URL: "",
      PORT: "",
      BOUNDED_TIME_SCALE: "",
      REDIS_URL: "",
      BOUNDED_ADMIN_PASSWORD: "",
    });
    expect(parsed.DATABASE_URL).toBe("postgresql://postgres@127.0.0.1:5432/bounded");
    expect(parsed.PORT).toBe(3000);
    expect(parsed.BOUNDED_TIME_SCALE).toBe(1);
    expect(parsed.REDIS_URL).toBe("redis://127.0.0.1:6379");
    expect(parsed.BOUNDED_ADMIN_PASSWORD).toBeUndefined();
  });

  it("treats undefined values as unset", () => {
    expect(parseEnv({ PORT: undefined }).PORT).toBe(3000);
  });

  it("an empty budget override stays unset instead of becoming a zero-second budget", () => {
    expect(parseEnv({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "" }).BOUNDED_BUDGET_IMPORTS_SOFT_S).toBeUndefined();
  });

  it("the batch lane: unset or empty is every kind the catalog allows, `none` turns it off, an unknown kind is refused", () => {
    expect(parseEnv({}).BOUNDED_BATCH_LANE_KINDS).toEqual(["csv_import"]);
    expect(parseEnv({ BOUNDED_BATCH_LANE_KINDS: "" }).BOUNDED_BATCH_LANE_KINDS).toEqual(["csv_import"]);
    expect(parseEnv({ BOUNDED_BATCH_LANE_KINDS: "none" }).BOUNDED_BATCH_LANE_KINDS).toEqual([]);
    expect(() => parseEnv({ BOUNDED_BATCH_LANE_KINDS: "agent_run" })).toThrow(
      /BOUNDED_BATCH_LANE_KINDS: not a kind the catalog lets use the batch lane: agent_run/,
    );
  });
});

describe("parseEnv: a bad value is refused with a message naming the variable and the fix", () => {
  it("DATABASE_URL that is not a postgresql:// URL", () => {
    const message = envErrorOf({ DATABASE_URL: "mysql://root@127.0.0.1/bounded" });
    expect(message).toMatch(/^DATABASE_URL: /);
    expect(message).toContain("must be a postgresql:// URL");
    expect(message).toContain("Fix DATABASE_URL in the environment or .env, see .env.example.");
  });

  it("DATABASE_URL that is not a URL at all", () => {
    const message = envErrorOf({ DATABASE_URL: "localhost:5432" });
    expect(message).toMatch(/^DATABASE_URL: /);
    expect(message).toContain("Fix DATABASE_URL");
  });

  it("PORT that is not a number", () => {
    const message = envErrorOf({ PORT: "http" });
    expect(message).toMatch(/^PORT: /);
    expect(message).toContain('(got "http")');
    expect(message).toContain("Fix PORT in the environment or .env");
  });

  it("PORT outside 1–65535", () => {
    expect(envErrorOf({ PORT: "70000" })).toMatch(/^PORT: .*\(got "70000"\)/);
    expect(envErrorOf({ PORT: "0" })).toMatch(/^PORT: /);
  });

  it("PORT that is not an integer", () => {
    expect(envErrorOf({ PORT: "3000.5" })).toMatch(/^PORT: /);
  });

  it("BOUNDED_TIME_SCALE of zero (it multiplies every duration, so zero would make every budget instant)", () => {
    const message = envErrorOf({ BOUNDED_TIME_SCALE: "0" });
    expect(message).toMatch(/^BOUNDED_TIME_SCALE: /);
    expect(message).toContain('(got "0")');
    expect(message).toContain("Fix BOUNDED_TIME_SCALE");
  });

  it("BOUNDED_TIME_SCALE that is negative, not a number or absurdly large", () => {
    expect(envErrorOf({ BOUNDED_TIME_SCALE: "-1" })).toMatch(/^BOUNDED_TIME_SCALE: /);
    expect(envErrorOf({ BOUNDED_TIME_SCALE: "fast" })).toMatch(/^BOUNDED_TIME_SCALE: /);
    expect(envErrorOf({ BOUNDED_TIME_SCALE: "1001" })).toMatch(/^BOUNDED_TIME_SCALE: /);
  });

  it("names the bad variable even when the good ones around it are set", () => {
    const message = envErrorOf({
      DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/bounded",
      REDIS_URL: "redis://127.0.0.1:6379",
      PORT: "3000",
      BOUNDED_TIME_SCALE: "nope",
    });
    expect(message).toMatch(/^BOUNDED_TIME_SCALE: /);
    expect(message).not.toMatch(/^(DATABASE_URL|PORT|REDIS_URL):/);
  });

  it("REDIS_URL that is not a redis:// URL", () => {
    expect(envErrorOf({ REDIS_URL: "http://127.0.0.1:6379" })).toMatch(/^REDIS_URL: must be a redis:\/\/ URL/);
  });

  it("a budget override that is not a positive number of seconds", () => {
    expect(envErrorOf({ BOUNDED_BUDGET_IMPORTS_HARD_S: "-5" })).toMatch(/^BOUNDED_BUDGET_IMPORTS_HARD_S: /);
    expect(envErrorOf({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "0" })).toMatch(/^BOUNDED_BUDGET_IMPORTS_SOFT_S: /);
  });

  it("a Redis key prefix with characters that would split keys", () => {
    expect(envErrorOf({ BOUNDED_REDIS_PREFIX: "bounded test" })).toMatch(/^BOUNDED_REDIS_PREFIX: /);
  });
});

describe("error messages never echo secrets", () => {
  it("names a bad secret without showing its value, and masks credentials in URLs", () => {
    expect(() => parseEnv({ BOUNDED_ADMIN_PASSWORD: "hunter2" })).toThrow(/^BOUNDED_ADMIN_PASSWORD: /);
    expect(() => parseEnv({ BOUNDED_ADMIN_PASSWORD: "hunter2" })).not.toThrow(/hunter2/);
    expect(() => parseEnv({ BOUNDED_BOOTSTRAP_TOKEN: "short-token" })).not.toThrow(/short-token/);
    expect(() => parseEnv({ DATABASE_URL: "mysql://app:pa55word@db/x" })).not.toThrow(/pa55word/);
  });
});

describe("Redis Cluster (BOUNDED_REDIS_CLUSTER)", () => {
  it("is off by default, and a prefix may hold braces either way", () => {
    expect(parseEnv({}).BOUNDED_REDIS_CLUSTER).toBe(false);
    expect(parseEnv({ BOUNDED_REDIS_PREFIX: "{bounded}" }).BOUNDED_REDIS_PREFIX).toBe("{bounded}");
    const on = parseEnv({
      BOUNDED_REDIS_CLUSTER: "1",
      BOUNDED_REDIS_PREFIX: "app:{bounded}:v2",
      REDIS_URL: "redis://10.0.0.7:7000",
    });
    expect(on.BOUNDED_REDIS_CLUSTER).toBe(true);
    expect(on.BOUNDED_REDIS_PREFIX).toBe("app:{bounded}:v2");
  });

  it("refuses cluster mode with a prefix that has no hash tag, in one line naming both variables and why", () => {
    for (const prefix of [undefined, "bounded", "bounded-{}", "bounded}{x", "{bounded"]) {
      const message = envErrorOf({ BOUNDED_REDIS_CLUSTER: "1", BOUNDED_REDIS_PREFIX: prefix });
      expect(message).toMatch(
        /^BOUNDED_REDIS_PREFIX: with BOUNDED_REDIS_CLUSTER=1 the prefix must contain a hash tag, e\.g\. \{bounded\}/,
      );
      expect(message).toContain("BullMQ needs all keys of a queue in one cluster slot");
      expect(message).toContain("Fix BOUNDED_REDIS_PREFIX");
      expect(message).not.toContain("\n");
    }
  });

  it("refuses a database other than 0 in cluster mode (a cluster has only database 0)", () => {
    expect(
      envErrorOf({ BOUNDED_REDIS_CLUSTER: "1", BOUNDED_REDIS_PREFIX: "{b}", REDIS_URL: "redis://127.0.0.1:7000/2" }),
    ).toMatch(/^REDIS_URL: with BOUNDED_REDIS_CLUSTER=1 /);
    expect(
      parseEnv({ BOUNDED_REDIS_CLUSTER: "1", BOUNDED_REDIS_PREFIX: "{b}", REDIS_URL: "redis://127.0.0.1:7000/0" })
        .REDIS_URL,
    ).toBe("redis://127.0.0.1:7000/0");
    expect(parseEnv({ REDIS_URL: "redis://127.0.0.1:6379/2" }).REDIS_URL).toBe("redis://127.0.0.1:6379/2");
  });

  it("accepts only 0 or 1", () => {
    expect(envErrorOf({ BOUNDED_REDIS_CLUSTER: "yes" })).toMatch(/^BOUNDED_REDIS_CLUSTER: /);
  });

  it("finds the hash tag the way Redis does: the first { and the first } after it, with text between", () => {
    expect(hasHashTag("{bounded}")).toBe(true);
    expect(hasHashTag("app:{bounded}:v2")).toBe(true);
    expect(hasHashTag("{}{bounded}")).toBe(false); // Redis hashes the whole key when the first tag is empty
    expect(hasHashTag("}{bounded}")).toBe(true);
    expect(hasHashTag("bounded")).toBe(false);
    expect(hasHashTag("{bounded")).toBe(false);
  });
});
