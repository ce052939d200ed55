// Package config reads the service's settings from the environment (the
// NEWSLETTER_* variables of docs/reference.md) and validates all of them at
// once, so a bad deployment fails at start-up with one line per wrong
// variable instead of at 3 a.m. Each value is parsed here, once, into the
// type of the package that uses it (mailer.Server, quiet.Window, a cron
// schedule, asynq's Redis options); only cmd/newsletter imports config.
package config
