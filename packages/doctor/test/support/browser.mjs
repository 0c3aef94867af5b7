#!/usr/bin/env node
// A stand-in for the system browser ($BROWSER): loads the URL given as last argument and follows the redirects,
// as a browser would after an auto-approved login, ending at the client's loopback listener.
const url = process.argv.at(-1)
const response = await fetch(url, { redirect: "follow" })
await response.text()
process.exit(response.ok ? 0 : 1)
