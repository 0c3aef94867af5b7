export * from "./internal/authorizationServer.js"
