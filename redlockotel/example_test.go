package redlockotel_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlockotel"
)

// A Locker whose metrics Prometheus scrapes, through the OpenTelemetry
// Prometheus exporter. A service would serve the handler on its own
// /metrics; here an httptest server stands in, and the example prints the
// operation counts it scraped.
func Example_prometheus() {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { _ = provider.Shutdown(ctx) }()
	obs, err := redlockotel.NewObserver(redlockotel.WithMeterProvider(provider))
	if err != nil {
		log.Fatal(err)
	}

	var clients []*redis.Client
	for _, addr := range exampleAddrs { // three Redis masters
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clients = append(clients, c)
	}
	locker, err := redlock.New(clients, redlock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	lock, err := locker.Obtain(ctx, "example:prometheus")
	if err != nil {
		log.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		log.Fatal(err)
	}

	// In a service: http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "redlock_operation_duration_seconds_count") {
			fmt.Println(line)
		}
	}
	// Output:
	// redlock_operation_duration_seconds_count{redlock_op="obtain",redlock_outcome="ok"} 1
	// redlock_operation_duration_seconds_count{redlock_op="release",redlock_outcome="ok"} 1
}
