package redlock

import "testing"

// A key is handed over at most maxHandoffs times in a row; the next release
// is a fair one, and the count starts again after it.
func TestClaimLimitsHandoffStreak(t *testing.T) {
	var g gates
	enterT(t, &g, "k")
	if o, fair := g.claimOffer("k"); o != nil || fair {
		t.Fatalf("claim with no offer = %v, %v; want nil, false", o, fair)
	}
	if o, fair := g.claimOffer("other"); o != nil || fair {
		t.Fatalf("claim on a key nobody waits for = %v, %v; want nil, false", o, fair)
	}
	for round := range 2 {
		for i := range maxHandoffs {
			o := &offer{a: &acquisition{kind: &oneKey}}
			g.postOffer("k", o, g.freedCount("k"))
			if got, fair := g.claimOffer("k"); got != o || fair {
				t.Fatalf("round %d, handoff %d: claim = %v, %v; want the offer", round, i, got, fair)
			}
			if g.withdraw("k", o) {
				t.Fatal("withdraw succeeded after the offer was claimed")
			}
		}
		o := &offer{a: &acquisition{kind: &oneKey}}
		g.postOffer("k", o, g.freedCount("k"))
		if got, fair := g.claimOffer("k"); got != nil || !fair {
			t.Fatalf("round %d: claim after %d handoffs = %v, %v; want nil, fair", round, maxHandoffs, got, fair)
		}
		if !g.withdraw("k", o) {
			t.Fatal("an unclaimed offer could not be withdrawn")
		}
	}
	// The offer of a kind without handoffs (a read-write lock's, behind a
	// lock on its key) is never claimed: it is poked.
	o := &offer{a: &acquisition{kind: &lockKind{}}}
	g.postOffer("k", o, g.freedCount("k"))
	if got, fair := g.claimOffer("k"); got != nil || fair {
		t.Fatalf("claim of an offer that takes no handoff = %v, %v; want nil, false", got, fair)
	}
}

// A waiter that saw the lock held by a goroutine of its Locker posts its
// offer only if that lock was not let go since: the release's poke found no
// offer, and a waiter that posted after it would sleep until the old
// holder's validity ends (an ObtainMulti waiter slept past its test's 20s
// deadline that way).
func TestPostAfterLetGoRetries(t *testing.T) {
	var g gates
	enterT(t, &g, "k")
	for _, letGo := range []struct {
		name string
		do   func()
	}{
		{"released", func() { g.released("k") }},
		{"claimed", func() { g.claimOffer("k") }},
	} {
		seen := g.freedCount("k")
		letGo.do()
		if g.postOffer("k", &offer{a: &acquisition{kind: &oneKey}}, seen) {
			t.Fatalf("%s since the waiter looked: its offer was posted, want try again", letGo.name)
		}
		if !g.postOffer("k", &offer{a: &acquisition{kind: &oneKey}}, g.freedCount("k")) {
			t.Fatalf("%s before the waiter looked: its offer was refused", letGo.name)
		}
		g.withdraw("k", g.lines["k"].offer)
	}
}

// enterT puts the test in g's line for key, until it ends.
func enterT(t *testing.T, g *gates, key string) {
	t.Helper()
	leave, _, err := g.enter(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leave)
}
