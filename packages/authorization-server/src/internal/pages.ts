import { randomToken } from "./crypto.js"
import { Html, html } from "./html.js"

const STYLE = `
:root{color-scheme:light dark;--fg:#1b1f24;--muted:#57606a;--bg:#f6f8fa;--card:#fff;--accent:#0b57d0;--warn-bg:#fff4ce;--warn-fg:#5c4400;--err-bg:#ffebe9;--err-fg:#82071e;--border:#d0d7de}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#9da7b3;--bg:#0d1117;--card:#161b22;--accent:#6ea8fe;--warn-bg:#3b2e00;--warn-fg:#f2cc60;--err-bg:#3d0b12;--err-fg:#ffa198;--border:#30363d}}
*{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;background:var(--bg);color:var(--fg)}
main{max-width:30rem;margin:3rem auto;padding:2rem;background:var(--card);border:1px solid var(--border);border-radius:12px}
h1{font-size:1.4rem;margin:0 0 1rem}p{margin:.5rem 0}label{display:block;font-weight:600;margin:1rem 0 .25rem}
input[type=text],input[type=password]{width:100%;padding:.6rem;border:1px solid var(--border);border-radius:6px;font:inherit;background:var(--card);color:var(--fg)}
button{font:inherit;padding:.6rem 1.2rem;border-radius:6px;border:1px solid var(--border);cursor:pointer;background:var(--card);color:var(--fg)}
button.primary{background:var(--accent);border-color:var(--accent);color:#fff}
button:focus-visible,input:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.actions{display:flex;gap:.75rem;margin-top:1.5rem}.host{font-size:1.25rem;font-weight:700;word-break:break-all}
.warning{background:var(--warn-bg);color:var(--warn-fg);padding:.75rem;border-radius:6px;margin:1rem 0}
.error{background:var(--err-bg);color:var(--err-fg);padding:.75rem;border-radius:6px;margin:1rem 0}
ul.scopes{padding-left:1.2rem}ul.scopes code{font-weight:600}.muted{color:var(--muted);font-size:.9rem}
`

/** A rendered page with the headers every page carries. */
export const page = (
  title: string,
  body: Html,
  options: { status?: number; redirectingForm?: boolean; headers?: Record<string, string> } = {},
): Response => {
  const nonce = randomToken(16)
  // No form-action on pages whose form answers with a redirect: Chromium checks form-action against every hop of the
  // redirect chain after the POST, and OAuth chains leave this origin by design (to the client, whose callback may
  // redirect again; in proxy mode upstream -> proxy callback -> client), so any list would break real flows.
  const formAction = options.redirectingForm === true ? "" : " form-action 'self';"
  const document = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${title}</title>
<style nonce="${nonce}">${new Html(STYLE)}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>`
  return new Response(document.value, {
    status: options.status ?? 200,
    headers: {
      ...options.headers,
      "Content-Type": "text/html; charset=utf-8",
      "Content-Security-Policy": `default-src 'none'; style-src 'nonce-${nonce}'; img-src 'self';${formAction} frame-ancestors 'none'; base-uri 'none'`,
      "X-Frame-Options": "DENY",
      "X-Content-Type-Options": "nosniff",
      // same-origin, not no-referrer: Chromium then sends "Origin: null" on our own form POSTs.
      "Referrer-Policy": "same-origin",
      "Cache-Control": "no-store",
      Pragma: "no-cache",
    },
  })
}

/** The page shown when the redirect URI cannot be trusted: the error is never sent to it. */
export const errorPage = (
  status: number,
  error: string,
  description: string,
  headers?: Record<string, string>,
): Response =>
  page(
    "Authorization error",
    html`<h1>This request cannot be completed</h1>
<div class="error" role="alert"><p><strong>Error:</strong> <code data-error="${error}">${error}</code></p>
<p data-error-description>${description}</p></div>
<p class="muted">The application that sent you here made a request this server cannot accept. You can close this page.</p>`,
    headers === undefined ? { status } : { status, headers },
  )

/** Login form. `request` is the original authorization request's query string, carried through unchanged. */
export const loginPage = (args: {
  readonly action: string
  readonly csrf: string
  readonly request: string
  readonly clientName: string
  readonly error?: string
  readonly username?: string
  readonly status?: number
  readonly headers?: Record<string, string>
}): Response =>
  page(
    "Sign in",
    html`<h1>Sign in</h1>
<p>Sign in to continue to <strong>${args.clientName}</strong>.</p>
${args.error === undefined ? "" : html`<div class="error" role="alert" id="login-error">${args.error}</div>`}
<form method="post" action="${args.action}">
<input type="hidden" name="csrf_token" value="${args.csrf}">
<input type="hidden" name="request" value="${args.request}">
<label for="username">Username</label>
<input type="text" id="username" name="username" autocomplete="username" required autofocus value="${args.username ?? ""}"${args.error === undefined ? "" : html` aria-describedby="login-error"`}>
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required>
<div class="actions"><button type="submit" class="primary">Sign in</button></div>
</form>`,
    {
      status: args.status ?? 200,
      redirectingForm: true,
      ...(args.headers === undefined ? {} : { headers: args.headers }),
    },
  )

/** Consent page: who asks, where the answer goes, for which resource and scopes. */
export const consentPage = (args: {
  readonly action: string
  readonly csrf: string
  readonly request: string
  readonly clientName: string
  readonly clientId: string
  readonly redirectHost: string
  readonly localhostOnly: boolean
  /** The client cannot be verified, so the user is asked every time (RFC 8252 §8.6). */
  readonly unverifiable?: boolean
  /** Set for a client ID metadata document client. */
  readonly metadataDocument?: { readonly host: string; readonly verified: boolean }
  readonly resourceName: string
  readonly resourceUri: string
  readonly scopes: ReadonlyArray<{ readonly name: string; readonly description: string }>
  /** The signed-in user; absent in proxy mode, where the user signs in upstream after approving. */
  readonly userName?: string
  /** Proxy mode: the full redirect URI, and the upstream authorization server the user is sent to on Approve. */
  readonly redirectUri?: string
  readonly upstream?: { readonly name: string }
  readonly headers?: Record<string, string>
}): Response =>
  page(
    "Authorize access",
    html`<h1>Authorize <span data-client-name>${args.clientName}</span>?</h1>
${
  args.metadataDocument === undefined
    ? ""
    : html`<p>This application is published by</p>
<p class="host" data-client-host>${args.metadataDocument.host}</p>
${
  args.metadataDocument.verified
    ? html`<p class="muted" data-client-verified>This server knows this publisher.</p>`
    : html`<div class="warning" role="note" data-client-unverified><strong>Unverified application:</strong> this server does not know ${args.metadataDocument.host}. The name above is what the application says about itself. Approve only if you trust ${args.metadataDocument.host}.</div>`
}`
}
<p>After you decide, you will be sent to</p>
<p class="host" data-redirect-host>${args.redirectHost}</p>
${args.redirectUri === undefined ? "" : html`<p class="muted">Full address: <code data-redirect-uri>${args.redirectUri}</code></p>`}
${
  args.localhostOnly
    ? html`<div class="warning" role="note" data-localhost-warning><strong>Warning:</strong> this application receives the answer on your own computer (${args.redirectHost}). Any program running on this computer could be the one asking. Approve only if you started this sign-in yourself from an application you trust.</div>`
    : ""
}
${
  args.unverifiable === true
    ? html`<p class="muted" data-unverifiable-client>This server cannot verify which application is asking: it has no secret and answers on this computer. That is why you are asked each time, even if you approved it before.</p>`
    : ""
}
<p><strong>${args.clientName}</strong> <span class="muted">(client ID <code>${args.clientId}</code>)</span> asks for access to <strong data-resource>${args.resourceName}</strong> <span class="muted">(<code>${args.resourceUri}</code>)</span> on your behalf:</p>
${
  args.scopes.length === 0
    ? html`<p data-no-scopes>No specific permissions (basic access only).</p>`
    : html`<ul class="scopes">${args.scopes.map((s) => html`<li data-scope="${s.name}"><code>${s.name}</code>: ${s.description}</li>`)}</ul>`
}
${args.userName === undefined ? "" : html`<p class="muted">Signed in as ${args.userName}.</p>`}
${
  args.upstream === undefined
    ? ""
    : html`<p data-upstream>If you approve, you will sign in at <strong>${args.upstream.name}</strong> next. This server asks before every new application, even if you already signed in there.</p>`
}
<form method="post" action="${args.action}">
<input type="hidden" name="csrf_token" value="${args.csrf}">
<input type="hidden" name="request" value="${args.request}">
<div class="actions">
<button type="submit" name="decision" value="approve" class="primary">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</div>
</form>`,
    { redirectingForm: true, ...(args.headers === undefined ? {} : { headers: args.headers }) },
  )

/** The answer to a POST whose CSRF token is missing or wrong. */
export const csrfRefused = (): Response =>
  page(
    "Request refused",
    html`<h1>Request refused</h1>
<div class="error" role="alert"><p><code data-error="csrf">csrf</code>: the form was not submitted from this server's own page (missing or invalid CSRF token), or your session expired.</p></div>
<p class="muted">Start again from the application you were using.</p>`,
    { status: 403 },
  )
