/**
 * Trace export: Effect's spans (one per endpoint, `AuthorizationServer.token`, ..., and those under it) through
 * `@effect/opentelemetry` into the official OpenTelemetry SDK, batched to an OTLP/HTTP collector. Loaded only when
 * `tracing` is configured, so a server without it never loads the SDK.
 *
 * @module
 */
import * as OtelTracer from "@effect/opentelemetry/OtelTracer"
import type { TracerProvider } from "@opentelemetry/api"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions"
import { Effect, Layer } from "effect"
import type { TracingConfig } from "./config.js"

/** The default `service.name`. */
export const SERVICE_NAME = "keyway-authorization-server"

/**
 * The layer installing Effect's tracer over an SDK tracer provider that exports to `<otlpEndpoint>/v1/traces`;
 * releasing it flushes the spans still batched, then shuts the provider down.
 *
 * @see {@link https://opentelemetry.io/docs/specs/otlp/#otlphttp | OTLP/HTTP}
 */
export const tracingLayer = (config: TracingConfig): Layer.Layer<never> => {
  const provider = Layer.effect(
    OtelTracer.OtelTracerProvider,
    Effect.acquireRelease(
      Effect.sync(
        (): TracerProvider & BasicTracerProvider =>
          new BasicTracerProvider({
            resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName ?? SERVICE_NAME }),
            spanProcessors: [
              new BatchSpanProcessor(
                new OTLPTraceExporter({ url: `${config.otlpEndpoint.replace(/\/$/, "")}/v1/traces` }),
                { scheduledDelayMillis: 500 },
              ),
            ],
          }),
      ),
      (p) => Effect.promise(() => p.forceFlush().finally(() => p.shutdown())).pipe(Effect.ignore),
    ),
  )
  return OtelTracer.layer.pipe(Layer.provide(provider))
}
