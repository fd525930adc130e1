// Entry of the watchdog thread: a worker thread does not inherit the process's TypeScript loader
// on every Node version, so it registers tsx itself and loads the typed thread (watchdog-thread.ts).
import { tsImport } from "tsx/esm/api";

await tsImport("./watchdog-thread.ts", import.meta.url);
