package cluster_test

import (
	"context"
	"net"
	"testing"

	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/internal/redistest"
)

// TestProxyAbandonedConnections: a storm of connections whose clients gave
// up before sending anything (clients that time out and reconnect on a
// busy machine) costs the server nothing, and a client behind the storm is
// served. A proxy that dials the server for every accepted connection, in
// its accept loop, falls behind such a storm and never catches up.
func TestProxyAbandonedConnections(t *testing.T) {
	ctx := t.Context()
	c, err := cluster.Start(ctx, cluster.Processes{}, 1, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	direct := cluster.NewClient(c.Nodes[0].Server().Addr())
	t.Cleanup(func() { _ = direct.Close() })
	before := redistest.ConnectionsReceived(t, direct)

	const storm = 300
	for range storm {
		conn, err := net.Dial("tcp", c.Nodes[0].Addr())
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Accepted after the storm: once it is answered, the proxy has taken
	// every connection of the storm.
	rc := c.NewClient(0)
	t.Cleanup(func() { _ = rc.Close() })
	if err := rc.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got := redistest.ConnectionsReceived(t, direct) - before; got != 1 {
		t.Fatalf("the server received %d connections for %d abandoned ones and one client; want 1", got, storm)
	}
}
