// Package config reads the service's settings from the environment (the
// NEWSLETTER_* variables of docs/reference.md) and validates all of them at
// once, so a bad deployment fails at start-up with one line per wrong
// variable instead of at 3 a.m. Plain values are parsed here, once (a
// quiet.Window, a cron schedule, asynq's Redis options); the settings
// whose types belong to components (the SMTP server, push keys, lanes,
// templates) and the components' defaults are handed in by the command
// (Parsers, Defaults), so that config imports no component and only
// cmd/newsletter imports config.
package config
