package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/otelmcp"
)

// metricInterval is how often metrics are exported with -otlp.
const metricInterval = 5 * time.Second

// setupOTLP exports the handler's traces and metrics over OTLP/HTTP to the
// collector at base (e.g. http://127.0.0.1:4318): traces to /v1/traces
// (batched), metrics to /v1/metrics every metricInterval. It returns the
// interceptor to install and the shutdown that flushes both, to call on
// SIGTERM.
func setupOTLP(ctx context.Context, base string) (mcphandler.Interceptor, func(context.Context) error, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, fmt.Errorf("-otlp %q: want the collector's OTLP/HTTP base URL, e.g. http://127.0.0.1:4318", base)
	}
	root := strings.TrimSuffix(u.String(), "/")
	res := resource.NewSchemaless(semconv.ServiceName("mcphandler-quickstart"))
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(root+"/v1/traces"))
	if err != nil {
		return nil, nil, err
	}
	mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(root+"/v1/metrics"))
	if err != nil {
		return nil, nil, err
	}
	// Batches of up to 2048 spans from a queue of 8192: at thousands of
	// calls a second the defaults (512 of 2048) post four times as often
	// and drop spans while an export is in flight.
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithBatcher(texp, sdktrace.WithMaxQueueSize(8192), sdktrace.WithMaxExportBatchSize(2048)))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(metricInterval))))
	shutdown := func(ctx context.Context) error {
		// Each provider's Shutdown exports what it holds first.
		return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx))
	}
	icp, err := otelmcp.NewInterceptor(otelmcp.WithTracerProvider(tp), otelmcp.WithMeterProvider(mp))
	if err != nil {
		shutdown(ctx)
		return nil, nil, err
	}
	return icp, shutdown, nil
}
