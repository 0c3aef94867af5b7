/**
 * Just enough HTML reading for the demo's scripted user: the authorization server's login and consent pages are
 * server-rendered with a known shape (one form, hidden inputs, `data-*` markers on what the user must see).
 *
 * @module
 */

const ENTITIES: Readonly<Record<string, string>> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " }

/** Decodes the character references the pages use. */
export const decodeEntities = (text: string): string =>
  text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/giu, (whole, name: string) => {
    if (name.startsWith("#x") || name.startsWith("#X")) return String.fromCodePoint(Number.parseInt(name.slice(2), 16))
    if (name.startsWith("#")) return String.fromCodePoint(Number.parseInt(name.slice(1), 10))
    return ENTITIES[name.toLowerCase()] ?? whole
  })

/** The text of an HTML fragment: tags removed, entities decoded, whitespace collapsed. */
export const textOf = (fragment: string): string =>
  decodeEntities(fragment.replace(/<[^>]*>/gu, ""))
    .replace(/\s+/gu, " ")
    .trim()

const attribute = (tag: string, name: string): string | undefined => {
  const match = new RegExp(`\\s${name}="([^"]*)"`, "iu").exec(tag)
  return match?.[1] === undefined ? undefined : decodeEntities(match[1])
}

/** The page's `<title>`. */
export const titleOf = (page: string): string | undefined => {
  const match = /<title>([\s\S]*?)<\/title>/iu.exec(page)
  return match?.[1] === undefined ? undefined : textOf(match[1])
}

/** The text of every element carrying the attribute `data-<name>`, in document order. */
export const dataTexts = (page: string, name: string): ReadonlyArray<string> => {
  const results: Array<string> = []
  const open = new RegExp(`<([a-z0-9]+)\\b[^>]*\\sdata-${name}(?:="[^"]*")?[^>]*>`, "giu")
  for (let match = open.exec(page); match !== null; match = open.exec(page)) {
    const tag = match[1] ?? ""
    const start = match.index + match[0].length
    // The marked elements hold inline content only, so the first matching close tag ends them.
    const end = page.toLowerCase().indexOf(`</${tag.toLowerCase()}>`, start)
    results.push(textOf(page.slice(start, end < 0 ? undefined : end)))
  }
  return results
}

/** A form: where it posts and its named fields (hidden and visible inputs, and submit buttons by value). */
export interface Form {
  readonly method: string
  readonly action: string
  readonly inputs: ReadonlyMap<string, string>
  readonly buttons: ReadonlyArray<{
    readonly name: string | undefined
    readonly value: string | undefined
    readonly label: string
  }>
}

/** The first form of a page, or undefined when it has none. */
export const firstForm = (page: string): Form | undefined => {
  const match = /<form\b([^>]*)>([\s\S]*?)<\/form>/iu.exec(page)
  if (match === null) return undefined
  const head = match[1] ?? ""
  const body = match[2] ?? ""
  const inputs = new Map<string, string>()
  for (const input of body.matchAll(/<input\b[^>]*>/giu)) {
    const name = attribute(input[0], "name")
    if (name !== undefined) inputs.set(name, attribute(input[0], "value") ?? "")
  }
  const buttons = [...body.matchAll(/<button\b([^>]*)>([\s\S]*?)<\/button>/giu)].map((button) => ({
    name: attribute(` ${button[1] ?? ""}`, "name"),
    value: attribute(` ${button[1] ?? ""}`, "value"),
    label: textOf(button[2] ?? ""),
  }))
  return {
    method: (attribute(` ${head}`, "method") ?? "get").toLowerCase(),
    action: attribute(` ${head}`, "action") ?? "",
    inputs,
    buttons,
  }
}
