/**
 * The authorization server on node:http: Keyway's one bridge between node:http and Web-standard handlers
 * (`@keyway/http/node`), which every Keyway server shares, re-exported whole. Request URLs are built from a public URL
 * (the issuer's origin, when started with the server's `listen`), never from the Host header; bad Host headers and
 * request-targets get 400, methods no endpoint can serve 405 with `Allow`, oversized bodies 413, and a failing handler
 * 500 without detail.
 *
 * @see {@link https://fetch.spec.whatwg.org/#request-class | Fetch Standard (Request, Response)}
 * @module
 */
export * from "@keyway/http/node"
