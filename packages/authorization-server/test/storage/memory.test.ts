import { RateLimiter } from "../../src/RateLimiter.js"
import { layerMemory, layerSqlite } from "../../src/storage/index.js"
import { storageContract } from "./contract.js"
import { rateLimitContract } from "./rateLimitContract.js"
import { recordContract } from "./recordContract.js"

storageContract("memory", () => layerMemory)
rateLimitContract("memory", () => RateLimiter.layerMemory)
rateLimitContract("memory storage", () => layerMemory)
// The SQL limiter's own statements, on a private database.
rateLimitContract("sqlite :memory:", () => layerSqlite({ path: ":memory:" }))
recordContract("memory", () => layerMemory)
