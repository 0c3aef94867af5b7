/**
 * The scripted user both clients' flows go through: loads the authorization URL, signs in on Keyway's login page,
 * approves on the consent page, and returns the URL the authorization server redirects back to. Plain code with no
 * dependency on either client, so it costs both the same.
 */

const cookieOf = (response: Response): string | undefined => response.headers.getSetCookie()[0]?.split(";")[0]

const csrfOf = (html: string): string => {
  const token = /name="csrf_token" value="([^"]+)"/.exec(html)?.[1]
  if (token === undefined) throw new Error("no CSRF token in the page")
  return token
}

export const loginAndConsent = async (
  fetchFn: typeof globalThis.fetch,
  authorizationUrl: string,
  user: { readonly username: string; readonly password: string },
): Promise<string> => {
  const issuer = new URL(authorizationUrl).origin
  const request = new URL(authorizationUrl).search.slice(1)
  const post = (path: string, cookie: string, values: Record<string, string>) =>
    fetchFn(new URL(path, issuer), {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie, origin: issuer },
      body: new URLSearchParams(values).toString(),
    })
  const first = await fetchFn(authorizationUrl, { redirect: "manual" })
  if (first.status !== 200) throw new Error(`authorize answered ${first.status} ${first.headers.get("location")}`)
  let cookie = cookieOf(first) ?? ""
  const login = await post("/authorize/login", cookie, {
    csrf_token: csrfOf(await first.text()),
    request,
    username: user.username,
    password: user.password,
  })
  if (login.status !== 303) throw new Error(`login answered ${login.status}`)
  await login.body?.cancel()
  cookie = cookieOf(login) ?? cookie
  const consent = await fetchFn(new URL(login.headers.get("location") ?? "", issuer), {
    redirect: "manual",
    headers: { cookie },
  })
  if (consent.status !== 200) throw new Error(`consent page answered ${consent.status}`)
  const answer = await post("/authorize/consent", cookie, {
    csrf_token: csrfOf(await consent.text()),
    request,
    decision: "approve",
  })
  if (answer.status !== 303) throw new Error(`consent answered ${answer.status}`)
  await answer.body?.cancel()
  return new URL(answer.headers.get("location") ?? "", issuer).href
}
