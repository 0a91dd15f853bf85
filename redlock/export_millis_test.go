package redlock

// ServerMillis is serverMillis (tests only).
var ServerMillis = serverMillis
