package redistest_test

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// A slot migration, watched between its steps: the source serves the key
// until it moves and answers ASK for keys it lacks; the target answers
// MOVED to a client that did not say ASKING, and serves the moved key to
// one that did; once assigned, the source answers MOVED and the target
// owns the slot. The cluster client reads the key at every step.
func TestClusterMigrateSlot(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterT(t, redistest.ClusterOptions{Masters: 2})
	ctx := t.Context()
	const key, absent = "{mig}held", "{mig}absent"
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := c.Nodes[0]
	if to == from {
		to = c.Nodes[1]
	}
	cc := c.ClusterClientT(t)
	if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	src, dst := from.NewClient(), to.NewClient()
	defer src.Close()
	defer dst.Close()

	// what each node answers at each step: GET key on the source, GET
	// absent on the source, GET key on the target, then ASKING + GET key
	// on the target.
	type replies struct{ srcKey, srcAbsent, dstKey, dstAsking string }
	observe := func() replies {
		var r replies
		r.srcKey = redirect(src.Get(ctx, key).Err())
		r.srcAbsent = redirect(src.Get(ctx, absent).Err())
		r.dstKey = redirect(dst.Get(ctx, key).Err())
		conn := dst.Conn()
		defer conn.Close()
		if err := conn.Do(ctx, "ASKING").Err(); err != nil {
			t.Fatalf("ASKING: %v", err)
		}
		r.dstAsking = redirect(conn.Get(ctx, key).Err())
		if got, err := cc.Get(ctx, key).Result(); err != nil || got != "v" {
			t.Errorf("cluster client GET: %q, %v", got, err)
		}
		return r
	}
	const nilReply = "redis:" // redis.Nil's text starts so
	want := map[redistest.MigrationStepKind]replies{
		redistest.SlotImporting: {srcKey: "", srcAbsent: nilReply, dstKey: "MOVED", dstAsking: nilReply},
		redistest.SlotMigrating: {srcKey: "", srcAbsent: "ASK", dstKey: "MOVED", dstAsking: nilReply},
		redistest.SlotKeyMoved:  {srcKey: "ASK", srcAbsent: "ASK", dstKey: "MOVED", dstAsking: ""},
		redistest.SlotAssigned:  {srcKey: "MOVED", srcAbsent: "MOVED", dstKey: "", dstAsking: ""},
	}
	var steps []string
	err = c.MigrateSlot(ctx, slot, to, func(s redistest.MigrationStep) error {
		steps = append(steps, s.Kind.String())
		if s.Kind == redistest.SlotKeyMoved && s.Key != key {
			t.Errorf("moved key %q, want %q", s.Key, key)
		}
		if got := observe(); got != want[s.Kind] {
			t.Errorf("%s: replies %+v, want %+v", s.Kind, got, want[s.Kind])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(steps, ", "); got != "importing, migrating, key moved, assigned" {
		t.Errorf("steps: %s", got)
	}
	if owner, err := c.SlotOwner(ctx, slot); err != nil || owner != to {
		t.Errorf("slot %d's owner after the migration: %v, %v; want %s", slot, owner, err, to.Addr)
	}
	if got, err := dst.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Errorf("GET on the new owner: %q, %v", got, err)
	}
}

// redirect returns the kind of redirect err is ("ASK", "MOVED",
// "TRYAGAIN", ...), or "" for no error, or err's text.
func redirect(err error) string {
	if err == nil {
		return ""
	}
	kind, _, _ := strings.Cut(err.Error(), " ")
	return kind
}
