// Command benchotel serves mcphandler for the load harness, with and
// without otelmcp, so that the cost of tracing and metrics is measured side
// by side on one build: one tool "echo" ({"text": string} -> the text) and
// -tools N dummy tools at /mcp, sessions in memory.
//
//	benchotel -addr 127.0.0.1:9109                                # no interceptor
//	benchotel -addr 127.0.0.1:9110 -otlp http://127.0.0.1:4318    # traces and metrics over OTLP/HTTP
//	benchotel -sink 127.0.0.1:4318                                # an OTLP/HTTP receiver that drops what it gets
//	benchotel -addr 127.0.0.1:9111 -otlp discard                  # spans batched to an exporter that drops them
//	benchotel -addr 127.0.0.1:9112 -otlp nowire                   # OTLP/HTTP encoding, requests dropped in process
//	benchotel -addr 127.0.0.1:9113 -otlp drop                     # spans dropped as they end: no batch processor
//
// With -otlp every span is sampled (unless -sample says otherwise) and
// exported in batches (-batch spans per export from a queue of -queue),
// and metrics every 5 s, as examples/quickstart does. -otlp drop, discard
// and nowire keep the exporter's work on this machine apart from the
// receiver's: "drop" gives the ended spans to a processor that drops them
// (no batch processor); "discard" batches them to an exporter that drops
// them; "nowire" adds the OTLP exporter's conversion and protobuf encoding,
// its HTTP requests answered in process without a connection.
// -exemplars=false turns the histograms' exemplars off. -only parts the
// cost: "spans" keeps the SDK's tracer and gives otelmcp a no-op meter,
// "metrics" the other way round, and "nop" installs, instead of otelmcp,
// an interceptor that only calls next (the handler's own cost of
// interception). "-only least", with -otlp, installs instead of otelmcp
// the least that any tracing and metrics of a request do with the same
// SDK and exporters: one SERVER span named by the method, without
// attributes, and one duration recorded in a histogram without
// attributes. Against it, what otelmcp adds is its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/otelmcp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"Text to echo."`
}

type dummyIn struct {
	X string `json:"x" jsonschema:"An input string."`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9109", "listen address")
	ntools := flag.Int("tools", 0, "number of extra dummy tools")
	otlp := flag.String("otlp", "", "OTLP/HTTP base URL: record traces and metrics with otelmcp and export them there")
	sample := flag.Float64("sample", 1, "with -otlp, the share of traces recorded (parent-based trace-id ratio sampler)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file at exit")
	sink := flag.String("sink", "", "serve an OTLP/HTTP receiver that drops everything at this address, and nothing else")
	batch := flag.Int("batch", 2048, "with -otlp, the batch span processor's MaxExportBatchSize")
	queue := flag.Int("queue", 8192, "with -otlp, the batch span processor's MaxQueueSize")
	exemplars := flag.Bool("exemplars", true, "with -otlp, let the histograms keep exemplars of sampled spans (the SDK's default)")
	only := flag.String("only", "", "with -otlp: spans | metrics (the other one no-op) | least (a span and a duration without attributes, instead of otelmcp); nop: an interceptor that only calls next")
	flag.Parse()
	if *sink != "" {
		log.Fatal(http.ListenAndServe(*sink, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-protobuf")
		})))
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		runtime.MemProfileRate = 4096
		defer func() {
			f, err := os.Create(*memprofile)
			if err != nil {
				log.Fatal(err)
			}
			defer f.Close()
			pprof.Lookup("allocs").WriteTo(f, 0)
		}()
	}
	tools := []mcphandler.Tool{mcphandler.NewTool(mcphandler.Tool{Name: "echo", Description: "Echoes the given text back as a text content block."},
		func(_ context.Context, _ *mcphandler.ToolCall, in echoIn) (string, error) { return in.Text, nil })}
	for i := range *ntools {
		tools = append(tools, mcphandler.NewTool(mcphandler.Tool{Name: fmt.Sprintf("tool_%04d", i), Description: "Dummy tool."},
			func(context.Context, *mcphandler.ToolCall, dummyIn) (string, error) { return "ok", nil }))
	}
	cfg := mcphandler.Config{Name: "benchotel", Limits: mcphandler.Limits{PageSize: len(tools)}, Authenticate: mcphandler.InsecureAnonymous,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) { return tools, nil }}
	flush := func(context.Context) error { return nil }
	if *only == "nop" {
		cfg.Interceptors = []mcphandler.Interceptor{func(ctx context.Context, _ *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
			return next(ctx)
		}}
	}
	if *otlp != "" {
		icp, shutdown, err := telemetry(*otlp, *only, *sample, *exemplars, sdktrace.WithMaxQueueSize(*queue), sdktrace.WithMaxExportBatchSize(*batch))
		if err != nil {
			log.Fatal(err)
		}
		cfg.Interceptors, flush = []mcphandler.Interceptor{icp}, shutdown
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcphandler.New(cfg))
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	done, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(done)
	flush(done)
}

// telemetry sets up otelmcp exporting to base: an OTLP/HTTP base URL,
// "discard" or "nowire" (see the package doc).
func telemetry(base, only string, sample float64, exemplars bool, bsp ...sdktrace.BatchSpanProcessorOption) (mcphandler.Interceptor, func(context.Context) error, error) {
	ctx := context.Background()
	topts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(base + "/v1/traces")}
	mopts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(base + "/v1/metrics")}
	if base == "discard" || base == "nowire" || base == "drop" {
		client := &http.Client{Transport: dropTransport{}}
		topts = []otlptracehttp.Option{otlptracehttp.WithEndpointURL("http://127.0.0.1:1/v1/traces"), otlptracehttp.WithHTTPClient(client)}
		mopts = []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL("http://127.0.0.1:1/v1/metrics"), otlpmetrichttp.WithHTTPClient(client)}
	}
	var texp sdktrace.SpanExporter
	texp, err := otlptracehttp.New(ctx, topts...)
	if err != nil {
		return nil, nil, err
	}
	if base == "discard" {
		texp = tracetest.NewNoopExporter()
	}
	mexp, err := otlpmetrichttp.New(ctx, mopts...)
	if err != nil {
		return nil, nil, err
	}
	processor := sdktrace.NewBatchSpanProcessor(texp, bsp...)
	if base == "drop" {
		processor = dropProcessor{}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(processor),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(sample))))
	mopt := []sdkmetric.Option{sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(5*time.Second)))}
	if !exemplars {
		mopt = append(mopt, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	}
	mp := sdkmetric.NewMeterProvider(mopt...)
	var (
		tpo trace.TracerProvider = tp
		mpo metric.MeterProvider = mp
	)
	switch only {
	case "spans":
		mpo = metricnoop.NewMeterProvider()
	case "metrics":
		tpo = tracenoop.NewTracerProvider()
	}
	shutdown := func(ctx context.Context) error { tp.Shutdown(ctx); return mp.Shutdown(ctx) }
	if only == "least" {
		icp, err := least(tpo, mpo)
		return icp, shutdown, err
	}
	icp, err := otelmcp.NewInterceptor(otelmcp.WithTracerProvider(tpo), otelmcp.WithMeterProvider(mpo))
	return icp, shutdown, err
}

// least is the least any tracing and metrics of a request do (see the
// package doc): a span named by the method, a duration, no attributes.
func least(tp trace.TracerProvider, mp metric.MeterProvider) (mcphandler.Interceptor, error) {
	tracer := tp.Tracer("benchotel")
	hist, err := mp.Meter("benchotel").Float64Histogram("mcp.server.operation.duration", metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(otelmcp.DurationBuckets...))
	if err != nil {
		return nil, err
	}
	server := trace.WithSpanKind(trace.SpanKindServer)
	return func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
		ctx, span := tracer.Start(ctx, req.Method, server)
		res := next(ctx)
		span.End()
		hist.Record(ctx, time.Since(req.Start).Seconds())
		return res
	}, nil
}

// dropProcessor drops every span as it ends.
type dropProcessor struct{}

func (dropProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropProcessor) Shutdown(context.Context) error                  { return nil }
func (dropProcessor) ForceFlush(context.Context) error                { return nil }

// dropTransport answers every request with an empty 200 without sending
// it, after reading its body.
type dropTransport struct{}

func (dropTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/x-protobuf"}}, Body: http.NoBody, Request: r}, nil
}
