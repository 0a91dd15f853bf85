// Package faults runs a toxiproxy proxy in-process in front of one Redis
// node, so the harness can make that node slow or unreachable on demand
// without touching the server itself (which may not be ours: -nodes).
package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

const latencyToxic = "bench-latency"

// Proxy is a TCP proxy on a free loopback port that forwards to one
// upstream address. Its methods must not be called concurrently.
type Proxy struct {
	// Addr is where clients connect instead of the upstream.
	Addr string

	p    *toxiproxy.Proxy
	down bool
}

// Start starts a proxy to upstream (host:port) on a free loopback port.
func Start(upstream string) (*Proxy, error) {
	// The API server is only the proxy's home for its logger and metrics;
	// its HTTP endpoint is never started.
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "bench", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("faults: starting proxy to %s: %w", upstream, err)
	}
	return &Proxy{Addr: p.Listen, p: p}, nil
}

// SetLatency delays every reply from the upstream by d (whole
// milliseconds, toxiproxy's resolution), or removes the delay for d <= 0.
func (p *Proxy) SetLatency(d time.Duration) error {
	if p.p.Toxics.GetToxic(latencyToxic) != nil {
		if err := p.p.Toxics.RemoveToxic(context.Background(), latencyToxic); err != nil {
			return fmt.Errorf("faults: removing latency: %w", err)
		}
	}
	if d <= 0 {
		return nil
	}
	if d%time.Millisecond != 0 {
		return fmt.Errorf("faults: latency %v is not whole milliseconds", d)
	}
	body, err := json.Marshal(map[string]any{
		"name":       latencyToxic,
		"type":       "latency",
		"stream":     "downstream",
		"attributes": map[string]any{"latency": d.Milliseconds()},
	})
	if err != nil {
		return err
	}
	if _, err := p.p.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		return fmt.Errorf("faults: adding latency: %w", err)
	}
	return nil
}

// Down closes the listener and every connection through the proxy: to a
// client the node is a host whose server process died (connection
// refused). Up undoes it on the same port.
func (p *Proxy) Down() {
	if !p.down {
		p.p.Stop()
		p.down = true
	}
}

// Up listens again after Down.
func (p *Proxy) Up() error {
	if !p.down {
		return nil
	}
	if err := p.p.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
		return fmt.Errorf("faults: restarting proxy on %s: %w", p.Addr, err)
	}
	p.down = false
	return nil
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	p.p.Stop()
	p.down = true
	return nil
}
