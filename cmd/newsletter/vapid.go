package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/newsletter/newsletter/channels/webpush"
)

// vapidCmd is `newsletter vapid generate`: a new VAPID key pair for web
// push, as the two lines of an env file. It needs no configuration, so it
// runs before anything else is set up. The private key is printed once and
// kept nowhere: whoever runs it stores it.
func vapidCmd(args []string, stdout io.Writer) error {
	if len(args) != 1 || args[0] != "generate" {
		return errors.New("usage: newsletter vapid generate")
	}
	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "NEWSLETTER_VAPID_PUBLIC_KEY=%s\nNEWSLETTER_VAPID_PRIVATE_KEY=%s\n", pub, priv)
	return err
}

// vapidPublicKey is the key the pages give browsers; "" with web push off.
func vapidPublicKey(c *appConfig) string {
	if c.VAPID == nil {
		return ""
	}
	return c.VAPID.PublicKey()
}
