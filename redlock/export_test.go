package redlock

// LineLen reports how many goroutines of l wait in line for key (tests
// only).
func LineLen(l *Locker, key string) int {
	l.gates.mu.Lock()
	defer l.gates.mu.Unlock()
	if ln := l.gates.lines[key]; ln != nil {
		return ln.users
	}
	return 0
}
