// Package accounts holds the rules of the console's accounts: people who
// sign in with an e-mail address, a password and a TOTP code (RFC 6238),
// beside the tokens that stay for the API and scripts.
//
//   - Passwords (password.go) follow NIST SP 800-63B: 12 to 128
//     characters, no composition rules, refused when zxcvbn judges them
//     guessable (a score under 3, with the address and the newsletter's
//     name as words an attacker tries first) or equal to the address (and
//     by the console when they are the account's current one); kept as
//     argon2id hashes, made only by a Hasher (hasher.go), which runs a
//     few at a time so their memory is bounded.
//   - The second factor (totp.go) is TOTP with SHA-1, 6 digits, 30 s
//     (what every authenticator app reads from an otpauth:// URI), one
//     step of drift either way; the store remembers the last step used,
//     so a code is never accepted twice. Ten recovery codes, single use,
//     are kept as SHA-256 hashes.
//   - Invites (invite.go) are random tokens kept only as hashes, valid for
//     InviteTTL, mailed by the worker (the api never imports the mailer).
//
// The store (store/accounts.go) keeps accounts under the hash tag {acct}.
package accounts
