/** The environment of the system under test: its own database, Redis prefix and ports. */
export const E2E_ENV = {
  PORT: "3100",
  DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/bounded_e2e",
  REDIS_URL: "redis://127.0.0.1:6379",
  BOUNDED_REDIS_PREFIX: "bounded-e2e",
  BOUNDED_SIM_PORT: "4110",
  MODEL_BASE_URL: "http://127.0.0.1:4110/v1",
  // A second model provider, on no route: /model-calls and /limiter list it beside the primary;
  // no call fails over to it here (e2e/model-calls.spec.ts).
  BOUNDED_MODEL_PROVIDERS: "backup",
  MODEL_BACKUP_BASE_URL: "http://127.0.0.1:4110/backup/v1",
  MODEL_BACKUP_NAME: "bounded-sim-backup-1",
  MARKETPLACE_BASE_URL: "http://127.0.0.1:4110/marketplace",
  IMAGE_PROVIDER_BASE_URL: "http://127.0.0.1:4110/images",
  // Production ratios in 1/2000 of the time: a 5.5 s median model call takes ~3 ms.
  BOUNDED_TIME_SCALE: "0.0005",
  // The tests start their own work: no demo traffic in the system under test.
  BOUNDED_DEMO: "0",
  BOUNDED_SIM_MODEL_ERROR_RATE: "0",
  BOUNDED_ADMIN_PASSWORD: "e2e-operator-password",
  BOUNDED_BOOTSTRAP_TOKEN: "e2e-bootstrap-token-0123456789abcdef",
  // The retention spec runs its pass itself (npm run retention): no scheduled one races it.
  BOUNDED_RETENTION_EVERY_S: "86400",
  // e2e/tenants.spec.ts waits for the workers to finish a deletion its request left unfinished.
  BOUNDED_TENANT_DELETION_EVERY_S: "1",
  BOUNDED_SESSION_SECRET: "e2e-session-secret-0123456789abcdef0123456789",
  // The test runner speaks for many clients (X-Forwarded-For) from 127.0.0.1, as a proxy would;
  // a request over ::1 is an untrusted peer (e2e/security.spec.ts).
  BOUNDED_TRUSTED_PROXIES: "127.0.0.1",
  // Upload limits per caller are tested in lib/security; here one address uploads for every test.
  BOUNDED_UPLOADS_PER_MINUTE: "100000",
  BOUNDED_UPLOADS_CONCURRENT: "50",
  // A generous import budget so a 2,000-row file completes (100 s at this scale); the deadline
  // tests set tight ones of their own. Other queues keep the default, as the budgets page shows.
  BOUNDED_BUDGET_IMPORTS_SOFT_S: "200000",
  BOUNDED_BUDGET_IMPORTS_HARD_S: "300000",
  // With that budget an import would take the batch lane and wait for the batch service: off.
  BOUNDED_BATCH_LANE_KINDS: "none",
  BOUNDED_BUDGET_SWEEPS_SOFT_S: "200000",
  BOUNDED_BUDGET_SWEEPS_HARD_S: "300000",
  // A sync's budget counts time in a worker slot; at this scale a reschedule's fixed cost (database
  // commits) is a larger share of a 60 s window than in production.
  BOUNDED_BUDGET_MARKETPLACE_SYNC_SOFT_S: "200000",
  BOUNDED_BUDGET_MARKETPLACE_SYNC_HARD_S: "300000",
  // Room for an import that runs about a minute here (20,000 rows): e2e/job-live.spec.ts watches a
  // running import and needs it still running while it looks.
  BOUNDED_UPLOAD_MAX_BYTES: String(4 * 1024 * 1024),
  BOUNDED_UPLOAD_MAX_ROWS: "20000",
  LOG_LEVEL: "warn",
} as const;

export const BASE_URL = `http://localhost:${E2E_ENV.PORT}`;

/**
 * A second, complete system (web, workers, simulators) where an import must run out of time: the
 * default import budget of 600 s set through the environment, at a time scale (1/50) where a
 * model call's simulated latency outweighs the fixed cost of a database commit, as in production —
 * so parts sized from the measured p99 really fit. 12 s of real time is ~50–100 rows here. Its own
 * database, Redis prefix and ports; the same build.
 */
export const TIGHT_ENV = {
  ...E2E_ENV,
  PORT: "3101",
  DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/bounded_e2e_tight",
  BOUNDED_REDIS_PREFIX: "bounded-e2e-tight",
  BOUNDED_SIM_PORT: "4111",
  MODEL_BASE_URL: "http://127.0.0.1:4111/v1",
  MODEL_BACKUP_BASE_URL: "http://127.0.0.1:4111/backup/v1",
  MARKETPLACE_BASE_URL: "http://127.0.0.1:4111/marketplace",
  IMAGE_PROVIDER_BASE_URL: "http://127.0.0.1:4111/images",
  BOUNDED_TIME_SCALE: "0.02",
  BOUNDED_BUDGET_IMPORTS_SOFT_S: "600",
  BOUNDED_BUDGET_IMPORTS_HARD_S: "900",
  // Rows one after another, as an import ran before items were in flight, and no automatic
  // split: the tests here need an import that runs out of time part-way, whatever this machine's
  // speed, for an operator to split.
  BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT: "1",
  BOUNDED_AUTO_SPLIT: "0",
} as const;

export const TIGHT_URL = `http://localhost:${TIGHT_ENV.PORT}`;

const {
  BOUNDED_BUDGET_IMPORTS_SOFT_S,
  BOUNDED_BUDGET_IMPORTS_HARD_S,
  BOUNDED_BUDGET_SWEEPS_SOFT_S,
  BOUNDED_BUDGET_SWEEPS_HARD_S,
  ...withoutBudgets
} = E2E_ENV;

/**
 * A third system with nothing overridden that shapes an import: the default budget (600 s soft,
 * 900 s hard, source `default`) and the catalog's rows in flight, at 1/20 of production time (the
 * budget is 30 s of real time; a model call ~0.3–0.7 s, so calls outweigh the fixed cost of
 * commits, as in production). Where a large upload shows it fits its default budget, and a file
 * larger than one budget's worth splits itself and completes.
 */
export const DEFAULT_ENV = {
  ...withoutBudgets,
  PORT: "3102",
  DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/bounded_e2e_default",
  BOUNDED_REDIS_PREFIX: "bounded-e2e-default",
  BOUNDED_SIM_PORT: "4112",
  MODEL_BASE_URL: "http://127.0.0.1:4112/v1",
  MODEL_BACKUP_BASE_URL: "http://127.0.0.1:4112/backup/v1",
  MARKETPLACE_BASE_URL: "http://127.0.0.1:4112/marketplace",
  IMAGE_PROVIDER_BASE_URL: "http://127.0.0.1:4112/images",
  BOUNDED_TIME_SCALE: "0.05",
  // Room for a file larger than one budget's worth (the provider bounds an import to ≈ 20 rows a
  // production second: 600 s hold ≈ 12,000 rows at best).
  BOUNDED_UPLOAD_MAX_ROWS: "20000",
  BOUNDED_UPLOAD_MAX_BYTES: String(2 * 1024 * 1024),
} as const;

export const DEFAULT_URL = `http://localhost:${DEFAULT_ENV.PORT}`;

/**
 * A fourth system where a file is larger than one budget's worth whatever this machine's speed: two
 * rows in flight at 1/50 of production time cap an import at ≈ 0.25 rows a production second (the
 * simulated model call, not the machine, sets it), so 250 rows need more than 1,000 s against a
 * 600 s default budget. Jobs split themselves here (the default), where the tight system does not.
 */
export const FANOUT_ENV = {
  ...DEFAULT_ENV,
  PORT: "3104",
  DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/bounded_e2e_fanout",
  BOUNDED_REDIS_PREFIX: "bounded-e2e-fanout",
  BOUNDED_SIM_PORT: "4114",
  MODEL_BASE_URL: "http://127.0.0.1:4114/v1",
  MODEL_BACKUP_BASE_URL: "http://127.0.0.1:4114/backup/v1",
  MARKETPLACE_BASE_URL: "http://127.0.0.1:4114/marketplace",
  IMAGE_PROVIDER_BASE_URL: "http://127.0.0.1:4114/images",
  BOUNDED_TIME_SCALE: "0.02",
  BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT: "2",
} as const;

export const FANOUT_URL = `http://localhost:${FANOUT_ENV.PORT}`;
