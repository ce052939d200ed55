package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parser reads the variables through getenv and collects one error line
// per bad one.
type parser struct {
	getenv   func(string) string
	defaults Defaults
	parsers  Parsers
	errs     []error
}

// parse hands value to a component's parser (none: the setting is only
// read) and keeps its error line.
func (p *parser) parse(parse func(string) error, value string) {
	if parse == nil {
		return
	}
	if err := parse(value); err != nil {
		p.errs = append(p.errs, err)
	}
}

func (p *parser) str(name, def string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	return def
}

func (p *parser) check(name string, ok bool, want string) {
	if !ok {
		p.errs = append(p.errs, Invalid(name, want))
	}
}

// Invalid is the line that says variable name's value is wrong and what
// is wanted instead; the components' parsers answer with it too.
func Invalid(name, want string) error {
	return fmt.Errorf("%s: want %s", name, want)
}

func (p *parser) integer(name string, def, min int) int {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	p.check(name, err == nil && n >= min, fmt.Sprintf("a whole number >= %d, got %q", min, v))
	return n
}

func (p *parser) duration(name string, def, min time.Duration) time.Duration {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	p.check(name, err == nil && d >= min, fmt.Sprintf("a duration >= %s such as 5m or 30s, got %q", min, v))
	return d
}

// offset is a duration that may be negative, at most bound either way.
func (p *parser) offset(name string, bound time.Duration) time.Duration {
	v := p.str(name, "")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	p.check(name, err == nil && d >= -bound && d <= bound, fmt.Sprintf("a duration from -%s to %s such as 90s or -90s, got %q", bound, bound, v))
	return d
}

func (p *parser) boolean(name string, def bool) bool {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	p.check(name, err == nil, fmt.Sprintf("true or false, got %q", v))
	return b
}

// together reports whether every one of vars (name, value) is set; when
// some are and some are not, each unset one is an error saying want.
func (p *parser) together(vars [][2]string, want string) bool {
	set := 0
	for _, v := range vars {
		if v[1] != "" {
			set++
		}
	}
	if set != 0 && set != len(vars) {
		for _, v := range vars {
			p.check(v[0], v[1] != "", want)
		}
	}
	return set == len(vars)
}
