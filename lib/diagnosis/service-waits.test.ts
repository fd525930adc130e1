import { describe, expect, it } from "vitest";
import { serviceWaitsOf } from "./service-waits";

const at = (s: number) => new Date(Date.UTC(2026, 11, 6, 14, 0, s)).toISOString();
const started = (s: number) => ({ at: at(s), type: "started", message: "Attempt 1 started" });
const wait = (s: number) => ({ at: at(s), type: "service_wait", message: "Waiting for the model service (silent)" });
const delayed = (s: number) => ({ at: at(s), type: "delayed", message: "Waiting 30 s" });

describe("service waits from a timeline whose resumes write no event", () => {
  it("a wait the job still waits out has no end: its latest start is the run that deferred", () => {
    expect(serviceWaitsOf([started(0), wait(5), delayed(6)], at(0))).toEqual([
      { service: "model", serviceName: "the model service", from: at(5), to: null },
    ]);
  });

  it("a wait ends when the job ran again: the row's latest start, after the deferral", () => {
    expect(serviceWaitsOf([started(0), wait(5), delayed(6)], at(40))).toEqual([
      { service: "model", serviceName: "the model service", from: at(5), to: at(40) },
    ]);
  });

  it("resumes that found the service still down make one wait, until the resume that went on", () => {
    // Each later wait is dated at the start of the run that found the outage still there.
    const events = [started(0), wait(5), delayed(6), wait(30), delayed(30), wait(60), delayed(60)];
    expect(serviceWaitsOf(events, at(120))).toEqual([
      { service: "model", serviceName: "the model service", from: at(5), to: at(120) },
    ]);
  });

  it("a wait followed by a rate-limit deferral ended before that deferral, and a new attempt's start ends one too", () => {
    const events = [started(0), wait(5), delayed(6), delayed(50), started(80), wait(90), delayed(91)];
    expect(serviceWaitsOf(events, at(80))).toEqual([
      { service: "model", serviceName: "the model service", from: at(5), to: at(50) },
      { service: "model", serviceName: "the model service", from: at(90), to: null },
    ]);
  });
});
