// Bodies that are known whole in memory beside their Web objects, so that neither side reads them back through a
// stream: a response made by `Body.wholeResponse` (its text, which the node:http bridge writes as it is) and a request
// the bridge made from a body it had already read whole (its bytes, which `Body.readBytes` returns as they are).

/** The text of each response made by `Body.wholeResponse`. */
export const wholeResponses = new WeakMap<Response, string>()

/** The bytes of each request the node:http bridge made from a body it read whole; taken by the first read. */
export const wholeRequests = new WeakMap<Request, Uint8Array>()
