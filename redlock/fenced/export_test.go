package fenced

// ClaimSQL returns t's claim statement (tests only).
func ClaimSQL(t *Table) string { return t.claim }
