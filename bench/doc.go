// Package bench holds the benchmark programs behind `make bench-*`. They
// measure, they do not assert: figures depend on the machine, so they are
// printed next to a baseline measured in the same run.
package bench
