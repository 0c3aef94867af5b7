/** A page a {@link visitor} is on. */
export interface VisitedPage {
  readonly url: string
  readonly status: number
  readonly html: string
}

/** A person with a browser, over HTTP; see {@link visitor}. */
export interface Visitor {
  /** GETs a URL (or POSTs a form to it), following redirects, and resolves with the page reached. */
  readonly go: (url: string, form?: URLSearchParams) => Promise<VisitedPage>
  /** Submits the page's first form: its hidden fields (a CSRF token among them) with what the person `typed`. */
  readonly submit: (page: VisitedPage, typed: Readonly<Record<string, string>>) => Promise<VisitedPage>
  /** The text of the page's first `<h1>`. */
  readonly heading: (page: VisitedPage) => string | undefined
}

/**
 * A person at an authorization server's pages without a browser engine: cookies kept (by name, whatever their path),
 * redirects followed by hand, forms read with regular expressions. It is for server-rendered pages of other
 * implementations (oidc-provider's device flow pages); Keyway's own pages are driven in Chromium.
 *
 * @see {@link https://html.spec.whatwg.org/multipage/form-control-infrastructure.html#form-submission-2 | HTML form submission}
 */
export const visitor = (): Visitor => {
  const jar = new Map<string, string>()
  const go = async (url: string, form?: URLSearchParams): Promise<VisitedPage> => {
    let next: { url: string; form?: URLSearchParams | undefined } = { url, form }
    for (let hop = 0; hop < 20; hop += 1) {
      const response = await fetch(next.url, {
        method: next.form === undefined ? "GET" : "POST",
        redirect: "manual",
        headers: {
          cookie: [...jar].map(([name, value]) => `${name}=${value}`).join("; "),
          ...(next.form === undefined ? {} : { "content-type": "application/x-www-form-urlencoded" }),
        },
        ...(next.form === undefined ? {} : { body: next.form.toString() }),
      })
      for (const cookie of response.headers.getSetCookie()) {
        const pair = cookie.split(";")[0] ?? ""
        const at = pair.indexOf("=")
        const value = pair.slice(at + 1)
        if (value === "") jar.delete(pair.slice(0, at))
        else jar.set(pair.slice(0, at), value)
      }
      const location = response.headers.get("location")
      if (response.status >= 300 && response.status < 400 && location !== null) {
        next = { url: new URL(location, next.url).href }
        continue
      }
      return { url: next.url, status: response.status, html: await response.text() }
    }
    throw new Error(`more than 20 redirects from ${url}`)
  }
  const submit = (page: VisitedPage, typed: Readonly<Record<string, string>>): Promise<VisitedPage> => {
    const form = /<form\b([^>]*)>([\s\S]*?)<\/form>/i.exec(page.html)
    if (form === null) throw new Error(`no form on ${page.url}: ${page.html}`)
    const action = /action="([^"]*)"/.exec(form[1] ?? "")?.[1] ?? page.url
    const fields = new URLSearchParams()
    for (const input of (form[2] ?? "").matchAll(/<input\b([^>]*)>/gi)) {
      const attributes = input[1] ?? ""
      const name = /name="([^"]*)"/.exec(attributes)?.[1]
      if (name !== undefined && /type="hidden"/.test(attributes)) {
        fields.set(name, /value="([^"]*)"/.exec(attributes)?.[1] ?? "")
      }
    }
    for (const [name, value] of Object.entries(typed)) fields.set(name, value)
    return go(new URL(action.replaceAll("&amp;", "&"), page.url).href, fields)
  }
  const heading = (page: VisitedPage) => /<h1>([^<]*)<\/h1>/.exec(page.html)?.[1]
  return { go, submit, heading }
}
