/**
 * `npx tsx bench/cpu-top.ts <file.cpuprofile> [n]`: the functions a V8 CPU profile (from
 * `node --cpu-prof`) spent the most time in, by self time and by total time (self plus what they
 * called), each with its share of the profile — to say where a bench's time goes. A function is
 * named with its file and line; the repository's own files by their path.
 */
import { readFileSync } from "node:fs";

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const [file, top = "25"] = process.argv.slice(2);
if (!file) {
  console.error("usage: npx tsx bench/cpu-top.ts <file.cpuprofile> [n]");
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const name = (n: Node) => {
  const { functionName, url, lineNumber } = n.callFrame;
  const path = url.replace(/^file:\/\//, "").replace(`${process.cwd()}/`, "");
  return `${functionName || "(anonymous)"} ${path ? `${path}:${lineNumber + 1}` : ""}`.trim();
};

const self = new Map<string, number>();
const total = new Map<string, number>();
let all = 0;
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0;
  all += dt;
  const leaf = byId.get(id)!;
  self.set(name(leaf), (self.get(name(leaf)) ?? 0) + dt);
  // Each function on the stack once, however deep its recursion.
  const seen = new Set<string>();
  for (let n: Node | undefined = leaf; n; n = byId.get(parent.get(n.id) ?? -1)) {
    const k = name(n);
    if (seen.has(k)) continue;
    seen.add(k);
    total.set(k, (total.get(k) ?? 0) + dt);
  }
});

const print = (title: string, m: Map<string, number>) => {
  console.log(`${title} (of ${(all / 1000).toFixed(0)} ms sampled)`);
  for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, Number(top)))
    console.log(`  ${((100 * us) / all).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`);
};
print("self time", self);
print("total time", total);
