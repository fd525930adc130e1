import { describe, expect, it } from "vitest";
import { parseEnv } from "./env";

describe("simulator base URL defaults", () => {
  it("follow BOUNDED_SIM_PORT when the URL variables are unset", () => {
    const e = parseEnv({ BOUNDED_SIM_PORT: "4999" });
    expect(e.MODEL_BASE_URL).toMatch(/^http:\/\/127\.0\.0\.1:4999(\/v1)?$/);
    expect(e.MARKETPLACE_BASE_URL).toBe("http://127.0.0.1:4999/marketplace");
    expect(e.IMAGE_PROVIDER_BASE_URL).toBe("http://127.0.0.1:4999/images");
  });

  it("keep the 4010 default port", () => {
    const e = parseEnv({});
    expect(e.MARKETPLACE_BASE_URL).toBe("http://127.0.0.1:4010/marketplace");
    expect(e.IMAGE_PROVIDER_BASE_URL).toBe("http://127.0.0.1:4010/images");
  });

  it("never override a URL that is set", () => {
    const e = parseEnv({
      BOUNDED_SIM_PORT: "4999",
      MODEL_BASE_URL: "https://api.example.com/v1",
      MARKETPLACE_BASE_URL: "https://mp.example.com/api",
    });
    expect(e.MODEL_BASE_URL).toBe("https://api.example.com/v1");
    expect(e.MARKETPLACE_BASE_URL).toBe("https://mp.example.com/api");
    expect(e.IMAGE_PROVIDER_BASE_URL).toBe("http://127.0.0.1:4999/images");
  });
});

describe("the model simulator's settings", () => {
  it("serve the configured MODEL_NAME when BOUNDED_SIM_MODELS is unset, and exactly the listed names when set", () => {
    expect(parseEnv({ MODEL_NAME: "gpt-4o-mini" }).BOUNDED_SIM_MODELS).toEqual(["gpt-4o-mini"]);
    expect(
      parseEnv({ MODEL_NAME: "gpt-typo", BOUNDED_SIM_MODELS: "bounded-sim-1, bounded-sim-large" }).BOUNDED_SIM_MODELS,
    ).toEqual(["bounded-sim-1", "bounded-sim-large"]);
  });

  it("name the services that start silent, and refuse a name the simulators do not have", () => {
    expect(parseEnv({ BOUNDED_SIM_SILENT: "model, ocr" }).BOUNDED_SIM_SILENT).toEqual(["model", "ocr"]);
    expect(parseEnv({}).BOUNDED_SIM_SILENT).toEqual([]);
    expect(() => parseEnv({ BOUNDED_SIM_SILENT: "modle" })).toThrow(
      /BOUNDED_SIM_SILENT.*model, backup-model, ocr, images, marketplace/s,
    );
  });
});
