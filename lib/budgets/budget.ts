/**
 * How long a job may run: the soft limit ends it cleanly, the hard limit stops it. A leaf module
 * (no imports), so the catalog that declares budgets and the resolver that applies the
 * environment to them do not import each other.
 */
export interface Budget {
  softMs: number;
  hardMs: number;
  /** Why this number: written next to it so nobody inherits a budget nobody chose. */
  why: string;
}
