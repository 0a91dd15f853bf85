package fenced_test

import (
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// exampleAddrs are three servers that the runnable examples use.
var exampleAddrs []string

func TestMain(m *testing.M) {
	// Starts the examples' servers, runs the tests and checks for leaked
	// goroutines with goleak.
	redistest.Main(m, 3, &exampleAddrs)
}
