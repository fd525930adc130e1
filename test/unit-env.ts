import { TEST_DATABASE, TEST_REDIS_PREFIX } from "./workers";

// Before each unit test file (vitest.config.ts's `unit` project): a Redis prefix of this worker's
// own — the model client's limiter and breaker keep their state in Redis even when a test stands
// in for the endpoint — and a database that does not exist, so a unit test that reaches for
// PostgreSQL fails saying so instead of touching a system running on this machine.
process.env.BOUNDED_REDIS_PREFIX = `${TEST_REDIS_PREFIX}-unit-${process.pid}`;
process.env.DATABASE_URL = `postgresql://postgres@127.0.0.1:5432/${TEST_DATABASE}_unit_tests_use_no_database`;
