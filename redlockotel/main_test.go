package redlockotel_test

import (
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// exampleAddrs are three servers that the runnable examples use.
var exampleAddrs []string

func TestMain(m *testing.M) {
	redistest.Main(m, 3, &exampleAddrs)
}
