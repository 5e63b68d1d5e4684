package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"

	"buf.build/go/protovalidate"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latch-authz/latch/internal/relv1"
	"github.com/latch-authz/latch/internal/server/apierr"
)

// authenticator checks preshared bearer keys. Keys are compared as SHA-256 digests in
// constant time, so neither a key's bytes nor its length leak through timing.
type authenticator struct {
	digests [][sha256.Size]byte
	open    bool   // admit everyone: no key is configured on purpose
	keyFile string // where the server's generated key is kept, told to a client with a wrong key
}

// openAuthenticator admits every request (Config.NoAuth).
func openAuthenticator() *authenticator { return &authenticator{open: true} }

func newAuthenticator(keys []string) *authenticator {
	a := &authenticator{}
	for _, k := range keys {
		a.digests = append(a.digests, sha256.Sum256([]byte(k)))
	}
	return a
}

// matches reports, in time independent of where they differ, whether token is one of
// the keys.
func (a *authenticator) matches(token string) bool {
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for _, d := range a.digests {
		match |= subtle.ConstantTimeCompare(got[:], d[:])
	}
	return match == 1
}

// check returns UNAUTHENTICATED without a bearer key and PERMISSION_DENIED with a
// wrong one, as SpiceDB does, with SpiceDB's messages first (clients match on them;
// the one for a missing key is SpiceDB's wrapping of go-grpc-middleware's).
func (a *authenticator) check(ctx context.Context) error {
	if a.open {
		return nil
	}
	vals := metadata.ValueFromIncomingContext(ctx, "authorization") // no copy of all the metadata
	if len(vals) == 0 {
		return status.Error(codes.Unauthenticated, "invalid preshared key: rpc error: code = Unauthenticated desc = Request unauthenticated with bearer: send the header `authorization: Bearer <preshared key>`")
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return status.Error(codes.Unauthenticated, "invalid preshared key: rpc error: code = Unauthenticated desc = Request unauthenticated with bearer: the authorization header is not a bearer token; send `authorization: Bearer <preshared key>`")
	}
	if !a.matches(token) {
		if a.keyFile != "" {
			return status.Errorf(codes.PermissionDenied, "invalid preshared key: invalid token; this server was started without --grpc-preshared-key and uses the key kept in %s on its machine", a.keyFile)
		}
		return status.Error(codes.PermissionDenied, "invalid preshared key: invalid token")
	}
	return nil
}

// validateMessage runs the protos' buf.validate rules and authzed-go's hand-written
// ones on a request, as SpiceDB does.
func validateMessage(m any) error {
	if pm, ok := m.(proto.Message); ok && !knownValid(m) {
		if err := protovalidate.Validate(pm); err != nil {
			return validationStatus(err)
		}
	}
	if v, ok := m.(interface{ HandwrittenValidate() error }); ok {
		if err := v.HandwrittenValidate(); err != nil {
			return status.Error(codes.InvalidArgument, apierr.Bound(err.Error()))
		}
	}
	return nil
}

// validationStatus renders a rule violation as SpiceDB does: "validation error:
// <field>: <reason>" (or "validation errors:" and every violation), with the
// violations themselves as a buf.validate.Violations detail, which the HTTP gateway
// passes on too.
func validationStatus(err error) error {
	ve, ok := errors.AsType[*protovalidate.ValidationError](err)
	if !ok {
		// A rule that does not compile or evaluate is the server's fault.
		return status.Error(codes.Internal, "validating the request: "+err.Error())
	}
	st := status.New(codes.InvalidArgument, apierr.Bound(ve.Error()))
	if withDetails, err := st.WithDetails(ve.ToProto()); err == nil {
		st = withDetails
	}
	return st.Err()
}

// grpc-go answers a request its codec cannot decode (invalid UTF-8 in a string,
// nesting too deep) with INTERNAL, a server fault clients may retry, and writes that
// status before any interceptor or handler runs. So the server's codec, for the
// authzed API's requests, records the failure instead of returning it, and the
// handlers, wrapped by invalidOnDecodeError, answer INVALID_ARGUMENT.

// decodeCodec is grpc-go's proto codec, recording undecodable authzed requests,
// leaving a rawMessage undecoded and decoding the common CheckPermissionRequest
// without reflection (relv1.DecodeCheckRequest).
type decodeCodec struct{ encoding.CodecV2 }

// undecodable maps a request message that failed to decode to why. Entries live
// from the codec's Unmarshal to the wrapped handler's check just after it.
var undecodable sync.Map

func newDecodeCodec() decodeCodec { return decodeCodec{encoding.GetCodecV2(protoenc.Name)} }

func (c decodeCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if raw, ok := v.(*rawMessage); ok {
		raw.b = raw.b[:0]
		for _, buf := range data {
			raw.b = append(raw.b, buf.ReadOnlyData()...)
		}
		return nil
	}
	if req, ok := v.(*v1.CheckPermissionRequest); ok && len(data) == 1 && relv1.DecodeCheckRequest(data[0].ReadOnlyData(), req) {
		return nil
	}
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	// Only the authzed services are wrapped, so only their requests may be left
	// for the handler to report; health and reflection keep grpc-go's answer.
	if m, ok := v.(proto.Message); ok && m.ProtoReflect().Descriptor().ParentFile().Package() == "authzed.api.v1" {
		undecodable.Store(v, err)
		return nil
	}
	return err
}

// decoded turns a decode failure the codec recorded for v into INVALID_ARGUMENT.
func decoded(v any, err error) error {
	if err != nil {
		return err
	}
	if cause, ok := undecodable.LoadAndDelete(v); ok {
		return undecodableStatus(cause.(error))
	}
	return nil
}

// undecodableStatus is the answer to a request that could not be decoded.
func undecodableStatus(cause error) error {
	return status.Error(codes.InvalidArgument, apierr.Bound(fmt.Sprintf("the request could not be decoded: %v", cause)))
}

// invalidOnDecodeError returns a copy of sd whose handlers report a request the
// codec could not decode as INVALID_ARGUMENT.
func invalidOnDecodeError(sd *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *sd
	out.Methods = make([]grpc.MethodDesc, len(sd.Methods))
	for i, m := range sd.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error { return decoded(v, dec(v)) }, interceptor)
		}
		out.Methods[i] = m
	}
	out.Streams = make([]grpc.StreamDesc, len(sd.Streams))
	for i, s := range sd.Streams {
		h := s.Handler
		s.Handler = func(srv any, stream grpc.ServerStream) error { return h(srv, &decodingStream{stream}) }
		out.Streams[i] = s
	}
	return &out
}

type decodingStream struct{ grpc.ServerStream }

func (s *decodingStream) RecvMsg(m any) error { return decoded(m, s.ServerStream.RecvMsg(m)) }
