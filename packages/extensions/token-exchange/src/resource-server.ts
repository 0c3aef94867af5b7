export * from "./internal/resourceServer.js"
