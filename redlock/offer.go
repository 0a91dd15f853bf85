package redlock

import "context"

// offer is what the head of a key's line posts while it sleeps between
// attempts: a Release by this Locker may claim it and hand the lock over
// in its own round (done), or poke it to try again at once (poke).
type offer struct {
	a    *acquisition
	plan acquirePlan
	// done receives the handoff's outcome, once, from the Release that
	// claimed the offer.
	done chan handoffResult
	// poke receives a value when the key was released without a handoff.
	poke chan struct{}
}

// newOffer is the offer of a, the head of its line. A kind without
// handoffs offers only to be poked: a Release by this Locker never claims
// its line (see releaseRound), and its plan is never made.
func newOffer(a *acquisition) *offer {
	o := &offer{a: a, done: make(chan handoffResult, 1), poke: make(chan struct{}, 1)}
	if a.kind.handoff {
		o.plan = a.kind.plan(a.keys, &a.cfg)
	}
	return o
}

// beforeOffer, when set (by tests only), runs just before the head of a
// line posts its offer.
var beforeOffer func(ctx context.Context)

// wake pokes the offer's owner to try at once; nothing for no offer.
func (o *offer) wake() {
	if o == nil {
		return
	}
	select {
	case o.poke <- struct{}{}:
	default:
	}
}

// poked is o.poke, or nil (never ready) for no offer.
func (o *offer) poked() <-chan struct{} {
	if o == nil {
		return nil
	}
	return o.poke
}

// outcome is o.done, the channel of the handoff's outcome, or nil (never
// ready) for no offer.
func (o *offer) outcome() <-chan handoffResult {
	if o == nil {
		return nil
	}
	return o.done
}

// handoffResult is a handoff round as the acquisition sees it.
type handoffResult struct {
	closed bool // the Locker was closed: no round ran
	granting
}
