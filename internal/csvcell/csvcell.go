// Package csvcell keeps a CSV cell from being read as a formula by a
// spreadsheet (CSV injection: a cell beginning with =, +, -, @, a tab or
// a carriage return is run by Excel, LibreOffice and Google Sheets), in
// a way the service's own importer undoes exactly.
package csvcell

// Guard is s as an export writes it: with a leading ' when a spreadsheet
// would read it as a formula, or when it already looks guarded (so that
// Unguard(Guard(s)) is s for every s, including a name that really
// begins with '=).
func Guard(s string) string {
	if needsGuard(s) {
		return "'" + s
	}
	return s
}

// Unguard is the cell's value as it was before Guard: one leading '
// removed when what follows it is what Guard guards. A hand-written
// file's '=x reads as =x, which is what a spreadsheet shows for it too.
func Unguard(s string) string {
	if len(s) > 1 && s[0] == '\'' && needsGuard(s[1:]) {
		return s[1:]
	}
	return s
}

func needsGuard(s string) bool {
	for len(s) > 0 && s[0] == '\'' {
		s = s[1:]
	}
	return len(s) > 0 && formulaStart(s[0])
}

// formulaStart: the characters a spreadsheet starts a formula with (or
// that, as a tab or CR, it skips to find one).
func formulaStart(c byte) bool {
	switch c {
	case '=', '+', '-', '@', '\t', '\r':
		return true
	}
	return false
}
