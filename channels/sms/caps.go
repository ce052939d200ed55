package sms

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// CapPerClient is the cap label of a code refused because one client
// (an address) asked for too many (NEWSLETTER_SMS_CODES_PER_CLIENT); the
// daily caps' labels are store.SMSCapPerNumberDay and store.SMSCapPerDay.
const CapPerClient = "per_client"

// DefaultCodesPerClient is how many codes one client address may have
// texted in an hour: a person who mistyped their number asks a few times;
// a script pumping texts to numbers it is paid for asks thousands.
const DefaultCodesPerClient = 5

// CapReachedMetric is newsletter_sms_cap_reached_total{cap}: texts
// refused or held because a cap was reached. The API (the per-client cap)
// and the sms lane (the daily caps) count into the same family: the
// first to register it on reg makes it, the other takes it (nil reg: an
// unregistered one, for tests).
func CapReachedMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "newsletter_sms_cap_reached_total",
		Help: "Texts held or refused because a cap was reached, by cap: per_number_day, per_day (the text waits for the next day, a code is dropped), per_client (a code refused with 429).",
	}, []string{"cap"})
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			if existing, ok := dup.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing
			}
		}
		panic(err) // as MustRegister: a clash of names is a mistake in the code
	}
	return c
}
