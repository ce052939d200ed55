package console

import (
	"bytes"
	"encoding/base64"
	"html/template"
	"image/png"
	"strings"

	"github.com/pquerna/otp"

	"github.com/newsletter/newsletter/services/accounts"
)

// qrSize is the QR code's side in pixels: a phone's camera reads it from
// an arm's length.
const qrSize = 200

// authenticator is a TOTP secret as the invite and account pages show it:
// the key to type, the otpauth:// link an app on this device opens, and
// the same link as a QR code for a phone's camera.
type authenticator struct {
	Secret string
	// URI and QR are typed for html/template: it lets through only
	// http(s) and mailto links unless told, and an otpauth:// href came
	// out as #ZgotmplZ. Both are made here from our own values (the
	// secret we generated, the normalised address, the newsletter's name
	// escaped by the otp library), never from a request.
	URI template.URL
	QR  template.URL // a data:image/png URL (the pages' CSP allows img-src data:)
}

// newAuthenticator shows secret for the account email of the newsletter
// issuer. A QR code that cannot be made is left out (the key and link
// still work).
func newAuthenticator(issuer, email, secret string) authenticator {
	uri := accounts.TOTPURI(issuer, email, secret)
	if !strings.HasPrefix(uri, "otpauth://") {
		return authenticator{Secret: secret}
	}
	a := authenticator{Secret: secret, URI: template.URL(uri)} // #nosec G203: built from our values (see the type)
	if png, err := qrPNG(uri); err == nil {
		a.QR = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png))
	}
	return a
}

// qrPNG is uri as a QR code in a PNG.
func qrPNG(uri string) ([]byte, error) {
	key, err := otp.NewKeyFromURL(uri)
	if err != nil {
		return nil, err
	}
	img, err := key.Image(qrSize, qrSize)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
