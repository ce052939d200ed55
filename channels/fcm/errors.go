package fcm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/newsletter/newsletter/channels/webpush"
)

// Error is FCM's answer other than 2xx (or the token endpoint's). It
// matches push.ErrGone, push.ErrUnavailable or push.ErrRefused with
// errors.Is, and push.RetryAfter reads its Retry-After.
type Error struct {
	Status int
	// Code is the FcmError errorCode when FCM gave one (UNREGISTERED,
	// QUOTA_EXCEEDED, ...), else the google.rpc status (NOT_FOUND, ...),
	// else the OAuth error of a token exchange.
	Code    string
	Message string

	class      error
	retryAfter time.Duration
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("fcm answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.retryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.retryAfter)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Unwrap gives the class: push.ErrGone, push.ErrUnavailable or
// push.ErrRefused.
func (e *Error) Unwrap() error { return e.class }

// RetryAfter is what a 429 or 5xx asked for in Retry-After, at most
// push.MaxRetryAfter; 0 when it did not say.
func (e *Error) RetryAfter() time.Duration { return e.retryAfter }

// errorBody is FCM v1's error answer (google.rpc.Status as JSON).
type errorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type      string `json:"@type"`
			ErrorCode string `json:"errorCode"`
		} `json:"details"`
	} `json:"error"`
}

const fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"

// parseError reads an error answer; an unreadable body leaves the status
// to decide.
func parseError(resp *http.Response, answer []byte) *Error {
	e := &Error{Status: resp.StatusCode}
	var b errorBody
	unregistered := false
	if json.Unmarshal(answer, &b) == nil {
		e.Message, e.Code = b.Error.Message, b.Error.Status
		for _, d := range b.Error.Details {
			if d.Type == fcmErrorType && d.ErrorCode != "" {
				e.Code = d.ErrorCode
				unregistered = d.ErrorCode == "UNREGISTERED"
			}
		}
	} else {
		e.Message = strings.TrimSpace(string(answer))
	}
	// The message goes to the logs and the task queue: a broken or
	// hostile answer gets its first maxMessage bytes there, no more.
	e.Message = clipMessage(e.Message)
	e.class = classify(e, unregistered)
	if e.class == webpush.ErrUnavailable {
		e.retryAfter = webpush.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return e
}

// classify maps an answer to what the caller does next, as
// firebase-admin-go does (messaging_errors.go: IsUnregistered reads only
// the FcmError detail's errorCode). Only UNREGISTERED retires a token: a
// bare 404 (a wrong project id or URL answers it for every device alike)
// and an INVALID_ARGUMENT (a bad token and a message too large look the
// same) are refusals, which drop the message and keep the device.
func classify(e *Error, unregistered bool) error {
	switch {
	case unregistered:
		return webpush.ErrGone
	case e.Status == http.StatusTooManyRequests || e.Status >= 500,
		e.Code == "QUOTA_EXCEEDED", e.Code == "UNAVAILABLE", e.Code == "INTERNAL":
		return webpush.ErrUnavailable
	default:
		return webpush.ErrRefused
	}
}

// maxMessage bounds the message an error carries from FCM's answer.
const maxMessage = 512

// clipMessage is msg cut to maxMessage bytes on a character boundary.
func clipMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}
