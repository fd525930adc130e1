import { defineConfig } from "@playwright/test";
import { BASE_URL, DEFAULT_ENV, E2E_ENV, FANOUT_ENV, TIGHT_ENV } from "./e2e/env";

/** The specs that run on the tight, default and fan-out systems (their `test.use({ baseURL })`), never on the main one. */
const OTHER_SYSTEMS_SPECS = [
  "cancel-import.spec.ts",
  "fan-out.spec.ts",
  "large-import.spec.ts",
  "limiter.spec.ts",
  "reserves.spec.ts",
  "split.spec.ts",
];

export default defineConfig({
  testDir: "e2e",
  testMatch: "**/*.spec.ts",
  fullyParallel: false,
  // Two lanes at once, each one file at a time on systems the other lane never touches: the specs of
  // the main system, and beside them the chaos run (a whole system of its own, e2e/chaos.spec.ts)
  // and the specs of the tight, default and fan-out systems. Two, not three: the machines
  // that run them have two cores, and with a third lane a busy machine failed the chaos run's health checks.
  workers: 2,
  projects: [
    { name: "systems", testIgnore: ["chaos.spec.ts", ...OTHER_SYSTEMS_SPECS], workers: 1 },
    { name: "own-systems", testMatch: ["chaos.spec.ts", ...OTHER_SYSTEMS_SPECS], workers: 1 },
  ],

  retries: 0,
  timeout: 120_000,
  expect: { timeout: 15_000 },
  reporter: [["list"]],
  outputDir: "test-results",
  use: {
    baseURL: BASE_URL,
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
    launchOptions: {
      // Debian's Chromium, as its headless shell (package chromium-headless-shell: the same engine
      // without the desktop browser's windowing, what Playwright itself runs headless tests in):
      // nothing is downloaded, and the browser tests spend a fifth less CPU drawing pages.
      executablePath: "/usr/bin/chromium-headless-shell",
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
      ],
    },
  },
  // The main system first: it builds the web app. The other three serve that build and start at once
  // (no URL to wait for each); the last entry waits until all three answer their health check.
  webServer: [
    {
      command: "node --import tsx e2e/serve.ts",
      url: `${BASE_URL}/api/health`,
      timeout: 300_000,
      reuseExistingServer: false,
      env: { ...E2E_ENV, NEXT_TELEMETRY_DISABLED: "1" },
      stdout: "pipe",
      stderr: "pipe",
      gracefulShutdown: { signal: "SIGTERM", timeout: 20_000 },
    },
    {
      command: "node --import tsx e2e/serve.ts tight",
      reuseExistingServer: false,
      env: { ...TIGHT_ENV, NEXT_TELEMETRY_DISABLED: "1" },
      stdout: "pipe",
      stderr: "pipe",
      gracefulShutdown: { signal: "SIGTERM", timeout: 20_000 },
    },
    {
      command: "node --import tsx e2e/serve.ts default",
      reuseExistingServer: false,
      env: { ...DEFAULT_ENV, NEXT_TELEMETRY_DISABLED: "1" },
      stdout: "pipe",
      stderr: "pipe",
      gracefulShutdown: { signal: "SIGTERM", timeout: 20_000 },
    },
    {
      command: "node --import tsx e2e/serve.ts fanout",
      reuseExistingServer: false,
      env: { ...FANOUT_ENV, NEXT_TELEMETRY_DISABLED: "1" },
      stdout: "pipe",
      stderr: "pipe",
      gracefulShutdown: { signal: "SIGTERM", timeout: 20_000 },
    },
    {
      command: "node --import tsx e2e/await-systems.ts",
      wait: { stdout: /the other systems are up/ },
      timeout: 300_000,
      reuseExistingServer: false,
      stdout: "pipe",
    },
  ],
});
