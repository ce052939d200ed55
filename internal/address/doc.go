// Package address normalises and validates the e-mail addresses that people
// type into the signup form, so every other package sees one canonical form.
package address
