package redlock

import "github.com/quorumlock/redlock/redlock/internal/conn"

// SentinelMaster is the address of the master that node's Sentinel link
// sends to, "" before its sentinels answered (tests only).
func SentinelMaster(l *Locker, node int) string {
	return l.nodes[node].pipe.(*conn.Sentinel).Master()
}
