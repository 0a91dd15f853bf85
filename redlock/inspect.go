package redlock

import (
	"context"
	"slices"
	"sync"

	"github.com/quorumlock/redlock/quorum"
)

// A semaphore's permits and a read-write lock's readers are lock keys of
// their own (slots, leases), each inspected as Locker.Inspect inspects a
// key, a few at a time.

// inspectLimit bounds the keys inspected at once.
const inspectLimit = 16

// Inspect is Locker.Inspect of each slot, in order (Key a permit's Lock.Key,
// Holder "" when free); a bad name or size is ErrInvalid.
func (s *Semaphore) Inspect(ctx context.Context) ([]*Status, error) {
	if err := s.kind.check(&s.l.cfg); err != nil {
		return nil, err
	}
	return s.l.inspectAll(ctx, s.slots())
}

// Inspect is Locker.Inspect of the writer key, and of each reader's lease
// (Key a reader's Lock.Key) that a node holds, by Key.
func (m *RWMutex) Inspect(ctx context.Context) (writer *Status, readers []*Status, err error) {
	if err := checkKey(m.name); err != nil {
		return nil, nil, err
	}
	writer, leases, err := m.l.inspect(ctx, m.name, m.l.cfg.layout.RWIndex(m.name))
	if writer == nil {
		return nil, nil, err
	}
	readers, lerr := m.l.inspectAll(ctx, leases)
	if readers == nil && len(leases) > 0 {
		return writer, nil, lerr
	}
	// A lease expires before the index lets go of it.
	readers = slices.DeleteFunc(readers, func(st *Status) bool {
		return !slices.ContainsFunc(st.Nodes, func(n NodeStatus) bool { return n.Held })
	})
	if err == nil {
		err = lerr
	}
	return writer, readers, err
}

// inspectAll inspects keys, inspectLimit at a time; with a node error, the
// first key's that failed; nil statuses when the Locker is closed.
func (l *Locker) inspectAll(ctx context.Context, keys []string) ([]*Status, error) {
	out, errs := make([]*Status, len(keys)), make([]error, len(keys))
	var wg sync.WaitGroup
	turns := make(chan struct{}, inspectLimit)
	for j, key := range keys {
		turns <- struct{}{}
		wg.Go(func() {
			defer func() { <-turns }()
			out[j], _, errs[j] = l.inspect(ctx, key, "")
		})
	}
	wg.Wait()
	for j, err := range errs {
		if err != nil {
			if out[j] == nil {
				return nil, err
			}
			return out, err
		}
	}
	return out, nil
}

// inspectVerdict completes st once the round of inspect has ended: a node
// still silent gets its timeout, and the holder is the token a majority
// holds. It returns ErrNoQuorum (with ctx's error) when under a majority
// answered or a node reaches another node's server, else nil.
func (l *Locker) inspectVerdict(ctx context.Context, key string, st *Status) error {
	answered, votes, refused := 0, map[string]int{}, false
	for i := range st.Nodes {
		n := &st.Nodes[i]
		if n.Addr == "" { // still running at the timeout
			n.Addr, n.Err = l.nodes[i].addr, l.nodes[i].pipe.WithCause(quorum.ErrTimeout)
		}
		if n.Err == nil {
			answered++
		}
		// A node that reaches another node's server: the cluster is
		// miscounted, which the caller must hear of.
		refused = refused || invalidNode(n.Err)
		if n.Held {
			votes[n.Token]++
		}
	}
	for tok, c := range votes {
		if c >= l.need {
			st.Holder = tok
		}
	}
	if answered < l.need || refused {
		nodes := make([]NodeResult, 0, len(st.Nodes))
		for _, n := range st.Nodes {
			o := OutcomeOK
			if n.Err != nil {
				o = OutcomeError
			}
			nodes = append(nodes, NodeResult{Addr: n.Addr, Outcome: o, Err: n.Err})
		}
		return withContext(ctx, newQuorumError("inspect", key, l.need, nodes, ErrNoQuorum))
	}
	return nil
}
