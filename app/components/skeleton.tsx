import styles from "./skeleton.module.css";

/**
 * A placeholder block while a page loads. Decorative: hidden from screen readers, which hear the
 * page's own "Loading …" status instead.
 */
export function Skeleton({ kind = "line", width }: { kind?: "line" | "value" | "row"; width?: string }) {
  return (
    <span aria-hidden="true" className={`${styles.block} ${styles[kind]}`} style={width ? { width } : undefined} />
  );
}
