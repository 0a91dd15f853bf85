// Asynchronous timer channels (the behaviour before Go 1.23, which a
// program whose go.mod says an older version still gets): the library must
// work under both settings, and under this one a reused timer could hold a
// stale tick.
//go:debug asynctimerchan=1

package quorum_test
