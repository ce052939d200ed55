// Package config reads the service's settings from the environment (the
// names of SPEC.md) and validates all of them at once, so a bad deployment
// fails at start-up with one line per wrong variable instead of at 3 a.m.
package config
