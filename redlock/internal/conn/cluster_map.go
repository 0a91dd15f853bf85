package conn

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// MasterOptions are the options of a client of the cluster master at addr:
// the cluster's credentials, TLS, dialer and timeouts.
func MasterOptions(o *redis.ClusterOptions, addr string) *redis.Options {
	return &redis.Options{
		Network: "tcp", Addr: addr, ClientName: o.ClientName, Dialer: o.Dialer, OnConnect: o.OnConnect,
		Protocol: o.Protocol, Username: o.Username, Password: o.Password,
		CredentialsProvider: o.CredentialsProvider, CredentialsProviderContext: o.CredentialsProviderContext,
		StreamingCredentialsProvider: o.StreamingCredentialsProvider,
		DialTimeout:                  o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		TLSConfig: o.TLSConfig, DisableIdentity: o.DisableIdentity, IdentitySuffix: o.IdentitySuffix,
	}
}

// read reads the slot map from the masters known (the seeds first time),
// each within the set-up time, and returns it with a pipe per master.
func (cl *Cluster) read() (*slotTable, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cl.setup)
	defer cancel()
	var slots []redis.ClusterSlot
	var err error
	if cl.opts.ClusterSlots != nil {
		slots, err = cl.opts.ClusterSlots(ctx)
	} else {
		slots, err = cl.ask(ctx)
	}
	if err != nil {
		return nil, err
	}
	t := new(slotTable)
	for _, s := range slots {
		if len(s.Nodes) == 0 || s.Start < 0 || s.End >= wire.Slots || s.Start > s.End {
			continue
		}
		p := cl.pipe(s.Nodes[0].Addr)
		for i := s.Start; i <= s.End; i++ {
			t[i] = p
		}
	}
	return t, nil
}

// ask runs CLUSTER SLOTS on the masters known, then on the seeds, until
// one answers. CLUSTER SLOTS, which go-redis marks deprecated for CLUSTER
// SHARDS, is answered by every Redis version and managed service; SHARDS
// needs 7.0.
func (cl *Cluster) ask(ctx context.Context) ([]redis.ClusterSlot, error) {
	cl.mu.Lock()
	var clients []*redis.Client
	for _, p := range cl.pipes {
		clients = append(clients, p.own)
	}
	cl.mu.Unlock()
	var errs []error
	for _, c := range clients {
		s, err := c.ClusterSlots(ctx).Result() //lint:ignore SA1019 see above
		if err == nil && len(s) > 0 {
			return s, nil
		}
		errs = append(errs, err)
	}
	for _, addr := range cl.opts.Addrs {
		_, o := ClientOptions(MasterOptions(cl.opts, addr), cl.timeout)
		o.ReadTimeout, o.WriteTimeout = cl.setup, cl.setup
		c := redis.NewClient(o)
		s, err := c.ClusterSlots(ctx).Result() //lint:ignore SA1019 see above
		_ = c.Close()                          // a client of this reading alone
		if err == nil && len(s) > 0 {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("redlock: cannot read the cluster's slot map (CLUSTER SLOTS): %w", errors.Join(errs...))
}
