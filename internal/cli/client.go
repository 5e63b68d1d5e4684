package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	authzed "github.com/authzed/authzed-go/v1"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultEndpoint is where client commands look for a server: latch serve's default.
const DefaultEndpoint = "127.0.0.1:50051"

// ClientConfig says how client commands reach a server.
type ClientConfig struct {
	// Endpoint is the server's gRPC address, host:port.
	Endpoint string
	// Token is the bearer token (a preshared key of the server); "" sends none.
	Token string
	// TLS connects with TLS, verifying the server against CACert or the system roots.
	// Without it the connection is plaintext, which suits a server on loopback.
	TLS bool
	// CACert is a PEM file of certificate authorities to trust instead of the system's.
	CACert string
}

// Validate reports what is wrong with c.
func (c ClientConfig) Validate() error {
	if c.Endpoint == "" {
		return errors.New("no endpoint: set --endpoint or LATCH_ENDPOINT")
	}
	if c.CACert != "" && !c.TLS {
		return errors.New("--ca-path needs --tls")
	}
	return nil
}

// clientFlags are the flags every client command has; resolve turns them into a
// ClientConfig, taking LATCH_ENDPOINT and LATCH_TOKEN for flags not given.
type clientFlags struct {
	endpoint, token, caCert string
	insecure, tls           bool
}

func addClientFlags(cmd *cobra.Command, f *clientFlags) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&f.endpoint, "endpoint", DefaultEndpoint, "server gRPC address (env LATCH_ENDPOINT)")
	fs.StringVar(&f.token, "token", "", "bearer token: a preshared key of the server (env LATCH_TOKEN)")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS, verifying the server certificate (default: plaintext, for a server on loopback)")
	// zed's name: --insecure is plaintext, the default; --insecure=false is --tls.
	fs.BoolVar(&f.insecure, "insecure", true, "")
	_ = fs.MarkHidden("insecure")
	fs.StringVar(&f.caCert, "ca-path", "", "PEM file of certificate authorities to trust with --tls (default: the system's)")
	fs.StringVar(&f.caCert, "tls-ca-cert", "", "")
	_ = fs.MarkDeprecated("tls-ca-cert", "use --ca-path")
}

func (f *clientFlags) resolve(cmd *cobra.Command, env Env) (ClientConfig, error) {
	c := ClientConfig{Endpoint: f.endpoint, Token: f.token, CACert: f.caCert}
	if v := env.Getenv("LATCH_ENDPOINT"); v != "" && !cmd.Flags().Changed("endpoint") {
		c.Endpoint = v
	}
	if v := env.Getenv("LATCH_TOKEN"); v != "" && !cmd.Flags().Changed("token") {
		c.Token = v
	}
	insecureSet := cmd.Flags().Changed("insecure")
	if insecureSet && f.insecure && f.tls {
		return c, errors.New("--insecure and --tls contradict each other: choose one")
	}
	c.TLS = f.tls || (insecureSet && !f.insecure)
	return c, c.Validate()
}

// client is a connection to a server plus what error messages need to know.
type client struct {
	*authzed.Client
	endpoint string
}

// dial connects to the server c names. The connection is lazy: an unreachable
// server is reported by the first call.
func dial(c ClientConfig) (*client, error) {
	creds := insecure.NewCredentials()
	if c.TLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CACert != "" {
			pem, err := os.ReadFile(c.CACert)
			if err != nil {
				return nil, fmt.Errorf("reading --ca-path: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--ca-path %s holds no PEM certificate", c.CACert)
			}
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if c.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken{token: c.Token, secure: c.TLS}))
	}
	ac, err := authzed.NewClient(c.Endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", c.Endpoint, err)
	}
	return &client{Client: ac, endpoint: c.Endpoint}, nil
}

// fail describes an error returned by a call made for op.
func (c *client) fail(op string, err error) error { return rpcFailed(op, c.endpoint, err) }

// bearerToken sends "authorization: Bearer <token>" with every call. It allows
// plaintext when the user chose it (a loopback server), as SpiceDB's own tools do.
type bearerToken struct {
	token  string
	secure bool
}

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearerToken) RequireTransportSecurity() bool { return b.secure }
