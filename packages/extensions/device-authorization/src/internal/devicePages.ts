import type { Extension } from "@keyway/authorization-server"

type Pages = Extension.Pages

/** The code entry: the code (prefilled from `verification_uri_complete`) to compare with the device's, then Continue. */
export const enterPage = (
  pages: Pages,
  args: {
    readonly action: string
    readonly csrf: string
    readonly prefill: string
    readonly user: string
    readonly error?: string
  },
): Response =>
  pages.render(
    "Connect a device",
    pages.html`<h1>Connect a device</h1>
<p>Enter the code shown on your device. ${args.prefill === "" ? "" : pages.html`<strong>Check that it is exactly the code your device shows</strong> before you continue.`}</p>
${args.error === undefined ? "" : pages.html`<div class="error" role="alert" id="code-error" data-code-error>${args.error}</div>`}
<form method="post" action="${args.action}">
<input type="hidden" name="csrf_token" value="${args.csrf}">
<label for="user_code">Code</label>
<input type="text" id="user_code" name="user_code" autocomplete="one-time-code" autocapitalize="characters" spellcheck="false" required autofocus value="${args.prefill}"${args.error === undefined ? "" : pages.html` aria-describedby="code-error"`}>
<div class="actions"><button type="submit" class="primary">Continue</button></div>
</form>
<p class="muted">Signed in as ${args.user}.</p>`,
    { status: args.error === undefined ? 200 : 400 },
  )

/**
 * The consent: who asks, for which resource and scopes, and the warning of RFC 8628 §5.4 that the request began on
 * another device.
 */
export const consentPage = (
  pages: Pages,
  args: {
    readonly action: string
    readonly csrf: string
    readonly userCode: string
    readonly clientName: string
    readonly clientId: string
    readonly resourceName: string
    readonly resourceUri: string
    readonly scopes: ReadonlyArray<{ readonly name: string; readonly description: string }>
    readonly user: string
  },
): Response =>
  pages.render(
    "Authorize a device",
    pages.html`<h1>Authorize <span data-client-name>${args.clientName}</span>?</h1>
<div class="warning" role="note" data-remote-warning><strong>This request started on another device.</strong> Approve only if you started it yourself, just now, on a device you are using and that shows the code <code data-user-code>${args.userCode}</code>. If someone sent you this code or a link to this page, deny: they may be trying to get access to your account.</div>
<p><strong>${args.clientName}</strong> <span class="muted">(client ID <code>${args.clientId}</code>)</span> asks for access to <strong data-resource>${args.resourceName}</strong> <span class="muted">(<code>${args.resourceUri}</code>)</span> on your behalf:</p>
${
  args.scopes.length === 0
    ? pages.html`<p data-no-scopes>No specific permissions (basic access only).</p>`
    : pages.html`<ul class="scopes">${args.scopes.map((s) => pages.html`<li data-scope="${s.name}"><code>${s.name}</code>: ${s.description}</li>`)}</ul>`
}
<p class="muted">Signed in as ${args.user}.</p>
<form method="post" action="${args.action}">
<input type="hidden" name="csrf_token" value="${args.csrf}">
<input type="hidden" name="user_code" value="${args.userCode}">
<div class="actions">
<button type="submit" name="decision" value="approve" class="primary">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</div>
</form>`,
  )

/** After the decision: back to the device. */
export const finishedPage = (pages: Pages, approved: boolean, clientName: string): Response =>
  pages.render(
    approved ? "Device connected" : "Request denied",
    approved
      ? pages.html`<h1 data-finished="approved">Device connected</h1><p><strong>${clientName}</strong> can now continue on your device. You can close this page.</p>`
      : pages.html`<h1 data-finished="denied">Request denied</h1><p><strong>${clientName}</strong> gets no access. You can close this page.</p>`,
  )

/** Code entry locked after too many wrong codes (RFC 8628 §5.1), with when to try again. */
export const lockedPage = (pages: Pages, retryAfter: number, wait: string): Response =>
  pages.render(
    "Too many attempts",
    pages.html`<h1>Too many attempts</h1>
<div class="error" role="alert" data-locked>Too many wrong codes were entered. For your security, code entry is paused. Try again in ${wait}.</div>
<p class="muted">If you did not type these codes, someone may be trying to guess a code; you can close this page.</p>`,
    { status: 429, headers: { "Retry-After": String(retryAfter) } },
  )
