const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }

/** Escapes text for HTML element content and quoted attribute values. */
export const escapeHtml = (value: string): string => value.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c)

/** A string of HTML that has already been escaped. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

/** Tagged template that escapes every interpolated value unless it is already `Html` (or an array of them). */
export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<unknown>): Html => {
  let out = strings[0] ?? ""
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? "")
  })
  return new Html(out)
}

const render = (value: unknown): string => {
  if (value instanceof Html) return value.value
  if (Array.isArray(value)) return value.map(render).join("")
  if (value === undefined || value === null || value === false) return ""
  return escapeHtml(String(value))
}
