/**
 * The pages of the connect flow: small HTML documents with the headers every page of Keyway sends (no framing, no
 * caching, no referrer: the connect page's URL holds the flow's reference).
 *
 * @module
 */

/** Escapes text for HTML element content and double-quoted attributes. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/gu, (c) => `&#${c.charCodeAt(0)};`)

/**
 * The headers of every page: CSP with `frame-ancestors 'none'` and X-Frame-Options against clickjacking, no caching,
 * no Referer (the reference in the connect page's URL must not reach the provider). `formTargets` are the origins a
 * form may be sent to or redirected to after sending (CSP `form-action` applies to the redirect to the provider too).
 *
 * @see {@link https://www.w3.org/TR/CSP3/#directive-frame-ancestors | CSP 3 frame-ancestors}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7034.html | RFC 7034 (X-Frame-Options)}
 */
export const pageHeaders = (formTargets: ReadonlyArray<string> = []): Headers =>
  new Headers({
    "content-type": "text/html; charset=utf-8",
    "content-security-policy": `default-src 'none'; style-src 'unsafe-inline'; form-action 'self'${formTargets.map((o) => ` ${o}`).join("")}; frame-ancestors 'none'; base-uri 'none'`,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
  })

const layout = (title: string, body: string): string =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
  `<title>${escapeHtml(title)}</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}button{font:inherit;padding:.5rem 1rem}</style>` +
  `</head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`

/** A page with a status, its headers, and an optional cookie. */
export const page = (
  status: number,
  title: string,
  body: string,
  options: { readonly formTargets?: ReadonlyArray<string>; readonly cookie?: string } = {},
): Response => {
  const headers = pageHeaders(options.formTargets)
  if (options.cookie !== undefined) headers.append("set-cookie", options.cookie)
  return new Response(layout(title, body), { status, headers })
}

/** The refusal page: 400 and one sentence that says what happened and what to do. */
export const refusal = (message: string): Response =>
  page(400, "This connection cannot continue", `<p data-error>${escapeHtml(message)}</p>`)

/** What the connect page shows. */
export interface ConnectPage {
  readonly serverName: string
  readonly providerName: string
  readonly user: string
  readonly action: string
  readonly reference: string
  readonly csrf: string
}

/** The connect page: who connects which account for whom, that it can be undone, and the button that starts. */
export const connectBody = (p: ConnectPage): string =>
  `<p><strong>${escapeHtml(p.serverName)}</strong> asks to connect your <strong>${escapeHtml(p.providerName)}</strong> account ` +
  `for the user <strong>${escapeHtml(p.user)}</strong>. It will call ${escapeHtml(p.providerName)} for you with the access you grant there.</p>` +
  `<p>You can disconnect the account later; ${escapeHtml(p.serverName)} then revokes its access at ${escapeHtml(p.providerName)} and forgets it.</p>` +
  `<form method="post" action="${escapeHtml(p.action)}">` +
  `<input type="hidden" name="ref" value="${escapeHtml(p.reference)}">` +
  `<input type="hidden" name="csrf" value="${escapeHtml(p.csrf)}">` +
  `<button type="submit">Continue to ${escapeHtml(p.providerName)}</button></form>`
