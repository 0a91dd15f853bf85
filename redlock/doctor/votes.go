package doctor

import "fmt"

// countFindings advises on the number of nodes, and says when too few of
// them can vote for any lock to be granted.
func countFindings(nodes []Node, need int, guard bool) []Finding {
	n := len(nodes)
	f := Finding{Check: Nodes, Severity: Warning}
	switch {
	case n == 1:
		f.Summary = "1 node: single-node mode, whose locks last only as long as that server keeps them"
		f.Fix = "use 3 or 5 independent masters for quorum mode"
	case n == 2:
		f.Summary = "2 nodes: a lock needs both, so one failed node stops every lock"
		f.Fix = "add a third independent master"
	case n%2 == 0:
		f.Summary = fmt.Sprintf("%d nodes, quorum %d: tolerates %s failed, as %s would", n, need, nodeCount(n-need), nodeCount(n-1))
		f.Fix = "use an odd number of nodes: add or remove one"
	default:
		f.Severity = OK
		f.Summary = fmt.Sprintf("%d nodes, quorum %d: tolerates %s failed", n, need, nodeCount(n-need))
	}
	out := []Finding{f}
	voting, seen := 0, map[string]bool{}
	for i := range nodes {
		if votes(&nodes[i], guard, seen) {
			voting++
		}
	}
	if voting < need {
		out = append(out, Finding{Check: Nodes, Severity: Error,
			Summary: fmt.Sprintf("only %d of %d nodes can grant a lock now, %d needed: no lock can be obtained", voting, n, need),
			Fix:     "fix the nodes' errors above"})
	}
	return out
}

// votes reports whether node x can grant locks now: every server that
// votes for it can, and none was seen before (seen holds the run_ids of
// the servers that vote). A cluster's master that abstains in some slots
// still votes in the others.
func votes(x *Node, guard bool, seen map[string]bool) bool {
	if x.Kind == KindServer || x.Kind == "" {
		return serverVotes(x, guard, false, seen)
	}
	if x.Err != nil || len(x.Shards) == 0 {
		return false
	}
	ok := true
	for i := range x.Shards {
		s := &x.Shards[i]
		ok = serverVotes(s, guard, x.Kind == KindCluster, seen) && ok
		if x.Kind == KindCluster && s.ClusterState != "" && s.ClusterState != "ok" {
			ok = false
		}
	}
	return ok
}

func serverVotes(x *Node, guard, inCluster bool, seen map[string]bool) bool {
	switch {
	case x.Err != nil, x.ScriptsErr != nil, x.Cluster && !inCluster, x.Role != "" && x.Role != "master", seen[x.RunID]:
		return false
	case guard && x.Guard.Abstain > 0 && x.Guard.Abstaining == x.Guard.Slots:
		return false
	case guard && x.MaxMemoryPolicy != "noeviction" && x.MaxMemory > 0:
		return false
	}
	if x.RunID != "" {
		seen[x.RunID] = true
	}
	return true
}
