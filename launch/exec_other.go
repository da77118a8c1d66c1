//go:build !unix

package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
)

// Exec runs the plan's runtime as a child (this platform cannot replace a
// process), forwarding interrupts, and exits with its status.
func Exec(p *Plan) error {
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	go func() {
		for s := range sig {
			cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.ExitCode())
	}
	return err
}
