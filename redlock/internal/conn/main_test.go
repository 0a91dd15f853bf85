package conn

import (
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

func TestMain(m *testing.M) {
	var addrs []string
	redistest.Main(m, 0, &addrs)
}
