// Package form turns the console's form posts into typed values, one
// type per form: the actions read a value, never r.Form. A constructor
// reads and bounds the body; checking the values against the rules is
// the shared checks' job (issues.CheckContent, store.CheckItem, …), so the
// console and the API refuse the same things.
package form
