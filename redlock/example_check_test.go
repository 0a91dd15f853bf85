package redlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// Check a deployment before the first lock: the example servers keep
// nothing across a restart, which Check reports with its fix.
func ExampleLocker_Check() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	report, err := locker.Check(context.Background(), redlock.WithClockWindow(200*time.Millisecond))
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
