package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// MigrationStep is a step of a slot's migration (MigrateSlot) that has
// just been taken.
type MigrationStep struct {
	Kind MigrationStepKind
	// Key is the key just moved, for SlotKeyMoved.
	Key string
}

// MigrationStepKind names the steps of a slot's migration, in their order.
type MigrationStepKind int

const (
	// SlotImporting: the target has the slot IMPORTING from the source. No
	// client is sent to the target yet.
	SlotImporting MigrationStepKind = iota + 1
	// SlotMigrating: the source has the slot MIGRATING to the target. The
	// source serves the keys it still has and answers ASK for others.
	SlotMigrating
	// SlotKeyMoved: one key went to the target (MIGRATE); once a step per
	// key.
	SlotKeyMoved
	// SlotAssigned: every master was told the target owns the slot
	// (SETSLOT NODE: target, then source, then the others); the source
	// answers MOVED.
	SlotAssigned
)

func (k MigrationStepKind) String() string {
	switch k {
	case SlotImporting:
		return "importing"
	case SlotMigrating:
		return "migrating"
	case SlotKeyMoved:
		return "key moved"
	case SlotAssigned:
		return "assigned"
	}
	return "step " + strconv.Itoa(int(k))
}

// MigrateSlot moves slot from the master that owns it to master to, step
// by step as redis-cli's resharding does, and calls after (when not nil)
// after each step, so that a test can act with the slot half moved. An
// error from after stops the migration where it is and is returned. At
// the end it waits until every answering node agrees on the new owner and
// says cluster_state:ok. Keys are moved one by one, without REPLACE: a key
// of the slot that exists on both sides is an error (BUSYKEY).
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to *ClusterNode, after func(MigrationStep) error) error {
	if after == nil {
		after = func(MigrationStep) error { return nil }
	}
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("redistest: slot %d is already %s's", slot, to.Addr)
	}
	src, dst := from.NewClient(), to.NewClient()
	defer src.Close()
	defer dst.Close()
	// The target first: a client the source sends there with ASK must
	// find the slot importing.
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", from.ID).Err(); err != nil {
		return fmt.Errorf("redistest: SETSLOT %d IMPORTING on %s: %w", slot, to.Addr, err)
	}
	if err := after(MigrationStep{Kind: SlotImporting}); err != nil {
		return err
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", to.ID).Err(); err != nil {
		return fmt.Errorf("redistest: SETSLOT %d MIGRATING on %s: %w", slot, from.Addr, err)
	}
	if err := after(MigrationStep{Kind: SlotMigrating}); err != nil {
		return err
	}
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return fmt.Errorf("redistest: GETKEYSINSLOT %d on %s: %w", slot, from.Addr, err)
		}
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			r, err := src.Do(ctx, "MIGRATE", "127.0.0.1", to.Port, k, 0, 5000).Text()
			if err != nil {
				return fmt.Errorf("redistest: MIGRATE of a key of slot %d from %s to %s: %w", slot, from.Addr, to.Addr, err)
			}
			if r == "NOKEY" { // expired or deleted meanwhile
				continue
			}
			if err := after(MigrationStep{Kind: SlotKeyMoved, Key: k}); err != nil {
				return err
			}
		}
	}
	if err := c.assign(ctx, slot, from, to); err != nil {
		return err
	}
	if err := after(MigrationStep{Kind: SlotAssigned}); err != nil {
		return err
	}
	return c.await(ctx, "the nodes agree on slot "+strconv.Itoa(slot)+"'s new owner", func(v []view) error {
		if err := agreed(v, true, true); err != nil {
			return err
		}
		tp, err := c.topology(v[0])
		if err != nil {
			return err
		}
		if tp.Owner[slot] != to {
			return errors.New("the old owner still has the slot")
		}
		return nil
	})
}

// assign tells the masters that to owns slot: to first (it bumps its
// epoch, so the change wins everywhere), then from (it stops answering
// ASK), then the other answering masters.
func (c *Cluster) assign(ctx context.Context, slot int, from, to *ClusterNode) error {
	tp, err := c.topologyAgreed(ctx, true)
	if err != nil {
		return err
	}
	order := []*ClusterNode{to, from}
	for _, m := range tp.Masters() {
		if m != to && m != from && m.answering() {
			order = append(order, m)
		}
	}
	for _, m := range order {
		cl := m.NewClient()
		err := cl.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", to.ID).Err()
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("redistest: SETSLOT %d NODE on %s: %w", slot, m.Addr, err)
		}
	}
	return nil
}
