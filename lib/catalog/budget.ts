/**
 * How long a job may run: the soft limit ends it cleanly, the hard limit stops it. A leaf module
 * (no imports) next to the catalog that declares budgets, so the resolver that applies the
 * environment to them (lib/budgets) sits above both.
 */
export interface Budget {
  softMs: number;
  hardMs: number;
  /** Why this number: written next to it so nobody inherits a budget nobody chose. */
  why: string;
}
