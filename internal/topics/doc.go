// Package topics is the operator's declaration of what a person can
// subscribe to and of the onboarding sequence after confirmation: the
// topics file (NEWSLETTER_TOPICS_FILE) or the built-in default, parsed and
// validated once at start-up. Every other package reads topics and steps
// from a *Set and never from the file.
package topics
