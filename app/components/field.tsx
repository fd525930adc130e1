import type { InputHTMLAttributes, ReactNode, SelectHTMLAttributes } from "react";

/** An option of a `SelectField`: a value shown as itself, or a value with its label. */
export type FieldOption = string | { value: string; label: string };

/** A labelled text input; the label wraps it, so the label names it for screen readers and tests. */
export function TextField({
  label,
  type = "text",
  ...input
}: { label: ReactNode } & InputHTMLAttributes<HTMLInputElement>) {
  return (
    <label className="field">
      {label}
      <input type={type} {...input} />
    </label>
  );
}

/**
 * A labelled select. `any` is the label of a first, empty option meaning "no filter"; without it
 * the select has only the given options.
 */
export function SelectField({
  label,
  options,
  any,
  ...select
}: { label: ReactNode; options: readonly FieldOption[]; any?: string } & SelectHTMLAttributes<HTMLSelectElement>) {
  return (
    <label className="field">
      {label}
      <select {...select}>
        {any !== undefined ? <option value="">{any}</option> : null}
        {options.map((o) => {
          const { value, label: text } = typeof o === "string" ? { value: o, label: o } : o;
          return (
            <option key={value} value={value}>
              {text}
            </option>
          );
        })}
      </select>
    </label>
  );
}
