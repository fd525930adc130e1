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
    const e = parseEnv({ BOUNDED_SIM_PORT: "4999", MODEL_BASE_URL: "https://api.example.com/v1", MARKETPLACE_BASE_URL: "https://mp.example.com/api" });
    expect(e.MODEL_BASE_URL).toBe("https://api.example.com/v1");
    expect(e.MARKETPLACE_BASE_URL).toBe("https://mp.example.com/api");
    expect(e.IMAGE_PROVIDER_BASE_URL).toBe("http://127.0.0.1:4999/images");
  });
});
