// Command latch is latch's single binary: the server (latch serve), the client commands
// and the validation-file runner. See internal/cli.
package main

import (
	"context"
	"os"

	"github.com/latch-authz/latch/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.OSEnv()))
}
