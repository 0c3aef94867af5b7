import { describe, expect, it } from "vitest"
import { readConsent } from "../src/agent.js"
import { dataTexts, decodeEntities, firstForm, titleOf } from "../src/html.js"

const CONSENT = `<!doctype html><html lang="en"><head><title>Authorize access</title></head><body><main>
<h1>Authorize <span data-client-name>Tom &amp; Jerry&#39;s &quot;app&quot;</span>?</h1>
<p class="host" data-redirect-host>127.0.0.1:5555</p>
<div class="warning" role="note" data-localhost-warning><strong>Warning:</strong> this application receives the answer on your own computer (127.0.0.1:5555).</div>
<p><strong data-resource>Keyway notes</strong></p>
<ul class="scopes"><li data-scope="notes:read"><code>notes:read</code>: Read your notes</li><li data-scope="notes:write"><code>notes:write</code>: Write &lt;them&gt;</li></ul>
<p class="muted">Signed in as Alice (demo user).</p>
<form method="post" action="/authorize/consent">
<input type="hidden" name="csrf_token" value="abc&amp;def">
<input type="hidden" name="request" value="response_type=code&amp;client_id=x">
<button type="submit" name="decision" value="approve" class="primary">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form></main></body></html>`

describe("reading the authorization server's pages", () => {
  it("decodes named and numeric character references", () => {
    expect(decodeEntities("&lt;a&gt; &amp; &quot;b&quot; &#39;c&#x27; &unknown;")).toBe(`<a> & "b" 'c' &unknown;`)
  })

  it("reads the consent page's markers", () => {
    expect(titleOf(CONSENT)).toBe("Authorize access")
    expect(dataTexts(CONSENT, "scope")).toEqual(["notes:read: Read your notes", "notes:write: Write <them>"])
    expect(readConsent(CONSENT)).toEqual({
      heading: `Authorize Tom & Jerry's "app"?`,
      clientName: `Tom & Jerry's "app"`,
      redirectHost: "127.0.0.1:5555",
      localhostWarning: "Warning: this application receives the answer on your own computer (127.0.0.1:5555).",
      resource: "Keyway notes",
      scopes: ["notes:read: Read your notes", "notes:write: Write <them>"],
      signedInAs: "Alice (demo user)",
    })
  })

  it("reads the form: action, decoded hidden inputs, buttons", () => {
    expect(firstForm(CONSENT)).toEqual({
      method: "post",
      action: "/authorize/consent",
      inputs: new Map([
        ["csrf_token", "abc&def"],
        ["request", "response_type=code&client_id=x"],
      ]),
      buttons: [
        { name: "decision", value: "approve", label: "Approve" },
        { name: "decision", value: "deny", label: "Deny" },
      ],
    })
    expect(firstForm("<p>no form</p>")).toBeUndefined()
  })

  it("has no localhost warning when the page shows none", () => {
    expect(readConsent("<h1>Authorize <span data-client-name>X</span>?</h1>").localhostWarning).toBeUndefined()
  })
})
