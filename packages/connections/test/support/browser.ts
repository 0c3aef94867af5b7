/**
 * A cookie-keeping HTTP client that plays the user's browser through the connect page, the provider's own login and
 * consent pages (node-oidc-provider's development interactions) and the callback.
 */
export interface BrowserPage {
  readonly url: string
  readonly status: number
  readonly html: string
  readonly headers: Headers
}

const formOf = (html: string, base: string) => {
  const form = /<form[^>]*action="([^"]*)"[^>]*>([\s\S]*?)<\/form>/iu.exec(html)
  if (form === null) return undefined
  const fields = new URLSearchParams()
  for (const input of form[2]?.matchAll(/<input[^>]*>/giu) ?? []) {
    const name = /name="([^"]*)"/iu.exec(input[0])?.[1]
    const value = /value="([^"]*)"/iu.exec(input[0])?.[1] ?? ""
    if (name !== undefined) fields.set(name, value.replaceAll("&#38;", "&").replaceAll("&amp;", "&"))
  }
  return { action: new URL((form[1] ?? "").replaceAll("&amp;", "&"), base).href, fields }
}

export const browser = () => {
  const jar = new Map<string, string>()
  const request = async (url: string, init: RequestInit = {}): Promise<Response> => {
    const headers = new Headers(init.headers)
    if (jar.size > 0) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "))
    const response = await fetch(url, { ...init, headers, redirect: "manual" })
    for (const line of response.headers.getSetCookie()) {
      const [pair = ""] = line.split(";")
      const at = pair.indexOf("=")
      jar.set(pair.slice(0, at), pair.slice(at + 1))
    }
    return response
  }
  /** Follows redirects until a page, or until `stop` says a URL is the place to stop (not loaded). */
  const go = async (url: string, init: RequestInit = {}, stop?: (url: URL) => boolean): Promise<BrowserPage> => {
    let current = url
    let response = await request(current, init)
    for (let hops = 0; response.status >= 300 && response.status < 400; hops++) {
      if (hops > 20) throw new Error("too many redirects")
      current = new URL(response.headers.get("location") ?? "", current).href
      await response.body?.cancel()
      if (stop?.(new URL(current))) return { url: current, status: 0, html: "", headers: new Headers() }
      response = await request(current)
    }
    return { url: current, status: response.status, html: await response.text(), headers: response.headers }
  }
  /** Sends the page's first form, with `values` filled in. */
  const submit = (page: BrowserPage, values: Record<string, string> = {}, stop?: (url: URL) => boolean) => {
    const form = formOf(page.html, page.url)
    if (form === undefined) throw new Error(`no form on ${page.url}: ${page.html.slice(0, 300)}`)
    for (const [k, v] of Object.entries(values)) form.fields.set(k, v)
    return go(
      form.action,
      { method: "POST", body: form.fields, headers: { "content-type": "application/x-www-form-urlencoded" } },
      stop,
    )
  }
  /**
   * The whole connect flow: the connect page, its button, the provider's login and consent; stops before the callback
   * when `stop` says so (to replay or tamper with it).
   */
  const connect = async (url: string, stop?: (url: URL) => boolean): Promise<BrowserPage> => {
    let page = await go(url)
    if (page.status !== 200) return page
    page = await submit(page, {}, stop)
    for (let step = 0; step < 4 && page.status === 200 && /name="(login|prompt)"/u.test(page.html); step++) {
      page = await submit(page, { login: "alice", password: "any password" }, stop)
    }
    return page
  }
  return { jar, request, go, submit, connect }
}
