/**
 * Just enough HTML reading for the test user: server-rendered login and consent pages with one form of hidden
 * inputs, text and password fields and submit buttons. Not an HTML parser, and not meant to be one.
 */

const ENTITIES: Readonly<Record<string, string>> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " }

/** Decodes character references. */
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
  const match = new RegExp(`\\s${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)')`, "iu").exec(tag)
  const value = match?.[1] ?? match?.[2]
  return value === undefined ? undefined : decodeEntities(value)
}

/** One input of a form. */
export interface Input {
  readonly name: string
  readonly type: string
  readonly value: string
}

/** One submit button of a form. */
export interface Button {
  readonly name: string | undefined
  readonly value: string
  readonly label: string
}

/** A form: where and how it posts, its named inputs and its submit buttons. */
export interface Form {
  readonly method: string
  readonly action: string
  readonly inputs: ReadonlyArray<Input>
  readonly buttons: ReadonlyArray<Button>
}

/** The first form of a page, or undefined when it has none. */
export const firstForm = (page: string): Form | undefined => {
  const match = /<form\b([^>]*)>([\s\S]*?)<\/form>/iu.exec(page)
  if (match === null) return undefined
  const head = ` ${match[1] ?? ""}`
  const body = match[2] ?? ""
  const inputs: Array<Input> = []
  for (const tag of body.matchAll(/<input\b[^>]*>/giu)) {
    const name = attribute(tag[0], "name")
    const type = (attribute(tag[0], "type") ?? "text").toLowerCase()
    if (name === undefined || type === "submit" || type === "button" || type === "image" || type === "reset") continue
    if ((type === "checkbox" || type === "radio") && !/\schecked\b/iu.test(tag[0])) continue
    inputs.push({ name, type, value: attribute(tag[0], "value") ?? (type === "checkbox" ? "on" : "") })
  }
  const buttons: Array<Button> = []
  for (const tag of body.matchAll(/<button\b([^>]*)>([\s\S]*?)<\/button>/giu)) {
    const attributes = ` ${tag[1] ?? ""}`
    const type = (attribute(attributes, "type") ?? "submit").toLowerCase()
    if (type !== "submit") continue
    buttons.push({
      name: attribute(attributes, "name"),
      value: attribute(attributes, "value") ?? "",
      label: textOf(tag[2] ?? ""),
    })
  }
  return {
    method: (attribute(head, "method") ?? "get").toLowerCase(),
    action: attribute(head, "action") ?? "",
    inputs,
    buttons,
  }
}

/** The text of the page's first `role="alert"` element (where login pages put "wrong password"), if any. */
export const alertOf = (page: string): string | undefined => {
  const match = /<([a-z0-9]+)\b[^>]*\srole="alert"[^>]*>([\s\S]*?)<\/\1>/iu.exec(page)
  return match?.[2] === undefined ? undefined : textOf(match[2])
}

/** The page's `<title>`, if any. */
export const titleOf = (page: string): string | undefined => {
  const match = /<title>([\s\S]*?)<\/title>/iu.exec(page)
  return match?.[1] === undefined ? undefined : textOf(match[1])
}

/**
 * The OAuth error an authorization server's error page shows in machine-readable form, as Keyway's authorization
 * server marks it (`data-error="<code>"` on the element with the code, `data-error-description` on the one with the
 * description); undefined on any other page.
 */
export const pageErrorOf = (page: string): { readonly error: string; readonly description: string } | undefined => {
  const code = /\sdata-error="([a-z_]+)"/u.exec(page)?.[1]
  if (code === undefined) return undefined
  const description = /<([a-z0-9]+)\b[^>]*\sdata-error-description\b[^>]*>([\s\S]*?)<\/\1>/iu.exec(page)?.[2]
  return { error: code, description: description === undefined ? "" : textOf(description) }
}
