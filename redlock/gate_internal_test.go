package redlock

import "testing"

// A key is handed over at most maxHandoffs times in a row; the next release
// is a fair one, and the count starts again after it.
func TestClaimLimitsHandoffStreak(t *testing.T) {
	var g gates
	leave, _, err := g.enter(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	if o, fair := g.claim("k"); o != nil || fair {
		t.Fatalf("claim with no offer = %v, %v; want nil, false", o, fair)
	}
	if o, fair := g.claim("other"); o != nil || fair {
		t.Fatalf("claim on a key nobody waits for = %v, %v; want nil, false", o, fair)
	}
	for round := range 2 {
		for i := range maxHandoffs {
			o := &offer{a: &acquisition{kind: &oneKey}}
			g.post("k", o)
			if got, fair := g.claim("k"); got != o || fair {
				t.Fatalf("round %d, handoff %d: claim = %v, %v; want the offer", round, i, got, fair)
			}
			if g.withdraw("k", o) {
				t.Fatal("withdraw succeeded after the offer was claimed")
			}
		}
		o := &offer{a: &acquisition{kind: &oneKey}}
		g.post("k", o)
		if got, fair := g.claim("k"); got != nil || !fair {
			t.Fatalf("round %d: claim after %d handoffs = %v, %v; want nil, fair", round, maxHandoffs, got, fair)
		}
		if !g.withdraw("k", o) {
			t.Fatal("an unclaimed offer could not be withdrawn")
		}
	}
	// The offer of a kind without handoffs (a read-write lock's, behind a
	// lock on its key) is never claimed: it is poked.
	o := &offer{a: &acquisition{kind: &lockKind{}}}
	g.post("k", o)
	if got, fair := g.claim("k"); got != nil || fair {
		t.Fatalf("claim of an offer that takes no handoff = %v, %v; want nil, false", got, fair)
	}
}
