package openfga

import "google.golang.org/grpc/status"

// HTTPStatus is the HTTP status and message OpenFGA's HTTP API answers err with, for
// the APIs that serve OpenFGA's stores beside it (AuthZEN's): err is an error of a
// Store snapshot's checks and lookups, of package fga, the engine or the store.
func HTTPStatus(err error) (int, string) {
	code, body := httpError(status.Convert(fgaErr(err)), true)
	return code, body.Message
}
