// Command otel is an MCP server that records an OpenTelemetry span and
// metrics for every MCP request (package otelmcp, a module of its own) and
// exports them over OTLP/HTTP to the collector OTEL_EXPORTER_OTLP_ENDPOINT
// names (default http://localhost:4318), for example Jaeger:
//
//	docker run --rm -p 16686:16686 -p 4318:4318 jaegertracing/all-in-one:latest
//	go run ./examples/otel    # call greet with the token "alice", then open http://localhost:16686
//
// This example is a module of its own, like otelmcp, so that the library's
// module needs no OpenTelemetry dependency.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/otelmcp"
)

var greet = mcphandler.NewTool(mcphandler.Tool{Name: "greet", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true}},
	func(ctx context.Context, call *mcphandler.ToolCall, in struct{ Name string }) (string, error) {
		return "Hello " + in.Name, nil // ctx carries the request's span: spans started here are its children
	})

func newHandler(tp trace.TracerProvider, mp metric.MeterProvider) (*mcphandler.Handler, error) {
	icp, err := otelmcp.NewInterceptor(otelmcp.WithTracerProvider(tp), otelmcp.WithMeterProvider(mp))
	if err != nil {
		return nil, err
	}
	return mcphandler.New(mcphandler.Config{
		Authenticate: auth.NewAPIKeys(map[string]mcphandler.Identity{"alice": {Tenant: "acme", Subject: "alice"}}).Authenticate,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{greet}, nil },
		Interceptors: []mcphandler.Interceptor{icp}, // first: outermost
	}), nil
}

// providers export over OTLP/HTTP; shutdown flushes what they hold.
func providers(ctx context.Context) (*sdktrace.TracerProvider, *sdkmetric.MeterProvider, func(context.Context) error, error) {
	texp, err := otlptracehttp.New(ctx) // reads the OTEL_EXPORTER_OTLP_* variables
	if err != nil {
		return nil, nil, nil, err
	}
	mexp, err := otlpmetrichttp.New(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	res := resource.NewSchemaless(attribute.String("service.name", "mcphandler-otel-example"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(texp), sdktrace.WithResource(res))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp)), sdkmetric.WithResource(res))
	return tp, mp, func(ctx context.Context) error { return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx)) }, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	tp, mp, shutdown, err := providers(ctx)
	if err != nil {
		log.Fatal(err)
	}
	h, err := newHandler(tp, mp)
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/mcp", h)
	srv := &http.Server{Addr: *addr, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); srv.Shutdown(context.Background()) }()
	log.Printf("MCP endpoint http://%s/mcp (Authorization: Bearer alice)", *addr)
	log.Print(srv.ListenAndServe())
	h.Close()
	if err := shutdown(context.Background()); err != nil { // export what is left
		log.Print(err)
	}
}
