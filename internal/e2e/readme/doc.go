// Package readme holds the test of the README's pasteable commands: it
// starts scripts/run-multidc.sh, as `make run-multidc` does, and runs the
// fenced block of README.md that follows it, failing when a command
// errors, so that the README cannot drift from what the system does.
package readme
