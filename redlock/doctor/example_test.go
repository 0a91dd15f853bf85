package doctor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/doctor"
)

// Check a deployment before the first lock: the example servers keep
// nothing across a restart, which Check reports with its fix.
func Example() {
	var clients []*redis.Client
	for _, addr := range exampleAddrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clients = append(clients, c)
	}

	report, err := doctor.Check(context.Background(), clients,
		doctor.WithNodeTimeout(time.Second), doctor.WithClockWindow(200*time.Millisecond))
	if err != nil {
		panic(err)
	}
	fmt.Println("worst:", report.Severity())
	for _, f := range report.Problems() {
		fmt.Printf("%s %s: %s\n", f.Severity, f.Check, f.Summary)
	}
	fmt.Println("fix:", report.Problems()[0].Fix)
	// Output:
	// worst: warning
	// warning persistence: restarts lose locks, guard needed (appendonly no: a restart starts empty)
	// warning persistence: restarts lose locks, guard needed (appendonly no: a restart starts empty)
	// warning persistence: restarts lose locks, guard needed (appendonly no: a restart starts empty)
	// fix: appendonly yes and appendfsync always, or the restart guard (WithRestartGuard, --restart-guard; then bootstrap once)
}
